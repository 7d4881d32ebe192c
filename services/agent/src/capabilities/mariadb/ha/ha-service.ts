// Registers the MariaDbHaAgent service beside MariaDbAgent, sharing its per-port
// serialiser (a fence and a supervisor restart of one instance never interleave) and its
// desired states (a fenced instance stays stopped; a re-pointed one is kept running). The
// XA calls (../instance/xa.ts) are SQL on a running instance only: not serialised, no op ledger.

import type * as grpc from '@grpc/grpc-js';
import type { AgentContext } from '../../../capability';
import { unary } from '../../../grpc-unary';
import { MariaDbHaAgentService, serveBeats, type MariaDbFenceRequest, type MariaDbHaStatusReply, type MariaDbHaStatusRequest, type MariaDbHaWatchBeat, type MariaDbHaWatchRequest, type MariaDbPromoteRequest, type MariaDbRepointRequest, type MariaDbWaitForGtidRequest, type MariaDbListXaRequest, type MariaDbDecideXaRequest, type MariaDbFinishXaRequest, type MariaDbPruneXaRequest, type MariaDbLeaseRenewal, type MariaDbCutConnectionsRequest, type MariaDbTableChecksumsRequest, type MariaDbResumeApplyRequest } from '@kcm/agent-api';
import { fence, killFenced, promote, repointStandby, waitForGtid } from './ha';
import { replicationStatus } from './ha-status';
import { layoutOf } from '../instance/lifecycle';
import { MasterLeases, type InstanceRole } from './master-lease';
import { cutConnectionsTo } from './cut-connections';
import { resumeApply, tableChecksums } from './table-checksums';
import { decideXa, finishXa, listPreparedXa, pruneXaDecisions } from '../instance/xa';
import type { mariadbSupervision } from '../instance/supervision';

export interface HaServiceDeps {
  once<T>(kind: string, opId: string, port: number, operation: () => Promise<T>): Promise<T>;
  desired: ReturnType<typeof mariadbSupervision>;
  /** The MariaDB module's per-port serialiser. */
  serialised<T>(port: number, work: () => Promise<T>): Promise<T>;
}

export function registerMariaDbHa(server: grpc.Server, ctx: AgentContext, deps: HaServiceDeps): void {
  const log = ctx.logger.child({ capability: 'mariadb-ha' });
  const { once, desired, serialised } = deps;
  const statusOf = async (port: number, checkMasterMs: number): Promise<MariaDbHaStatusReply> => ({
    ...(await replicationStatus(ctx, port, checkMasterMs)),
    ...(await desired.report(port)),
  });
  const roleOf = async (port: number): Promise<InstanceRole> => {
    const s = await replicationStatus(ctx, port, 0);
    return !s.running ? 'down' : !s.answering ? 'unknown' : s.read_only ? 'read-only' : 'writable';
  };
  const leases = new MasterLeases({
    stateDir: ctx.stateDir,
    logger: log,
    hostaddr: ctx.hostaddr,
    roleOf,
    fence: async (port, why) => void (await killFenced(await layoutOf(ctx, port), desired.stopped, serialised, why)),
  });
  void leases.start().catch((err) => log.error({ err }, 'master leases did not start'));
  server.addService(MariaDbHaAgentService.service, {
    ReplicationStatus: unary(log, 'MariaDbHa.ReplicationStatus', (req: MariaDbHaStatusRequest) => statusOf(req.port, Math.min(Math.max(req.check_master_ms, 0), 10_000))),
    WatchStatus: (call: grpc.ServerWritableStream<MariaDbHaWatchRequest, MariaDbHaWatchBeat>) => {
      // At most a host's worth of instances, each a real port: a caller cannot make the agent measure without bound.
      const ports = [...new Set(call.request.ports)].filter((p) => Number.isInteger(p) && p > 0 && p < 65_536).slice(0, 256);
      serveBeats(call, async () => ({ statuses: await Promise.all(ports.map((port) => statusOf(port, 0))) }));
    },
    Promote: unary(log, 'MariaDbHa.Promote', (req: MariaDbPromoteRequest) => once('ha-promote', req.op_id, req.port, () => promote(ctx, req))),
    RepointStandby: unary(log, 'MariaDbHa.RepointStandby', (req: MariaDbRepointRequest) =>
      once('ha-repoint', req.op_id, req.port, () => desired.runningAfter(req.port, () => repointStandby(ctx, req))),
    ),
    // Not through `once`: a fence must not queue behind a restart of the same instance (see fence()).
    Fence: unary(log, 'MariaDbHa.Fence', (req: MariaDbFenceRequest) => ctx.ops.run(`mariadb.ha-fence.${req.op_id}`, () => fence(ctx, req, desired.stopped, serialised))),
    WaitForGtid: unary(log, 'MariaDbHa.WaitForGtid', (req: MariaDbWaitForGtidRequest) => waitForGtid(ctx, req)),
    ListPreparedXa: unary(log, 'MariaDbHa.ListPreparedXa', (req: MariaDbListXaRequest) => listPreparedXa(ctx, req)),
    DecideXa: unary(log, 'MariaDbHa.DecideXa', (req: MariaDbDecideXaRequest) => decideXa(ctx, req)),
    FinishXa: unary(log, 'MariaDbHa.FinishXa', (req: MariaDbFinishXaRequest) => finishXa(ctx, req)),
    PruneXaDecisions: unary(log, 'MariaDbHa.PruneXaDecisions', (req: MariaDbPruneXaRequest) => pruneXaDecisions(ctx, req)),
    RenewMasterLeases: unary(log, 'MariaDbHa.RenewMasterLeases', (req: MariaDbLeaseRenewal) => leases.renew(req)),
    CutConnectionsTo: unary(log, 'MariaDbHa.CutConnectionsTo', (req: MariaDbCutConnectionsRequest) => cutConnectionsTo(log, req)),
    // Not serialised: reading every row can take long, and a fence must not wait behind it.
    TableChecksums: unary(log, 'MariaDbHa.TableChecksums', (req: MariaDbTableChecksumsRequest) => tableChecksums(ctx, req)),
    ResumeApply: unary(log, 'MariaDbHa.ResumeApply', (req: MariaDbResumeApplyRequest) => resumeApply(ctx, req)),
  });
}

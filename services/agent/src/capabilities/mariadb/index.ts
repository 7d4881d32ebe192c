// The MariaDB capability module: registers the MariaDbAgent service (proto/agent-mariadb.proto).
// Commands that change state run through the op ledger, so a retried op_id returns the
// first attempt's result. Failures are logged without request bodies (they hold passwords).

import type * as grpc from '@grpc/grpc-js';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import { streamBackupHandler } from './backup/backup-stream';
import { installInstance } from './instance/install';
import { checkPort } from './instance/instance-layout';
import { layoutOf, removeInstance, startInstance, stopInstance } from './instance/lifecycle';
import { mariadbSupervision } from './instance/supervision';
import { mariadbProbeReply } from '../host-probe/instance-probes';
import { MariaDbAgentService, type MariaDbInstallRequest, type MariaDbInstanceCommand, type MariaDbListTablesRequest, type MariaDbPrepareEngineRequest, type MariaDbProbeRequest, type MariaDbRebuildRequest, type MariaDbReplicationRequest, type MariaDbUpgradeEngineRequest, type MariaDbVariablesRequest } from '@kcm/agent-api';
import { rebuildStandby } from './backup/rebuild';
import { registerRestoreService } from './restore/restore-service';
import { configureReplication } from './instance/replication';
import { listClusterTables } from './instance/tables';
import { readVariables } from './instance/variables';
import { registerMariaDbHa } from './ha/ha-service';
import { upgradeEngine } from './instance/upgrade-engine';
import { prepareEngineReply } from '../engines/prepare-engine';

/**
 * Runs operations that change an instance one at a time per port (a rebuild and a stop of
 * the same instance must not interleave). One serialiser per agent: ports are per host.
 */
export function portSerialiser() {
  const tails = new Map<number, Promise<unknown>>();
  return <T>(port: number, operation: () => Promise<T>): Promise<T> => {
    const next = (tails.get(port) ?? Promise.resolve()).catch(() => {}).then(operation);
    tails.set(port, next);
    void next.catch(() => {}).finally(() => {
      if (tails.get(port) === next) tails.delete(port);
    });
    return next;
  };
}

export const mariadbModule: CapabilityModule = {
  name: 'mariadb',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'mariadb' });
    const serialised = portSerialiser();
    // op_ids are per capability: the same id sent to Install and Start names two operations.
    const once = <T>(kind: string, opId: string, port: number, operation: () => Promise<T>): Promise<T> =>
      ctx.ops.run(`mariadb.${kind}.${opId}`, () => serialised(port, operation));
    // The desired state each command leaves (see ../supervisor.ts): what the supervisor keeps running.
    const desired = mariadbSupervision(ctx, serialised);
    server.addService(MariaDbAgentService.service, {
      Install: unary(log, 'MariaDb.Install', (req: MariaDbInstallRequest) =>
        once('install', req.op_id, req.spec?.port ?? 0, () => desired.runningAfter(req.spec?.port, () => installInstance(ctx, req))),
      ),
      Start: unary(log, 'MariaDb.Start', (req: MariaDbInstanceCommand) =>
        once('start', req.op_id, req.port, () => desired.runningAfter(req.port, async () => startInstance(ctx, await layoutOf(ctx, checkPort(req.port))))),
      ),
      Stop: unary(log, 'MariaDb.Stop', (req: MariaDbInstanceCommand) =>
        once('stop', req.op_id, req.port, async () => {
          const layout = await layoutOf(ctx, checkPort(req.port));
          await desired.stopped(req.port);
          return stopInstance(ctx, layout);
        }),
      ),
      Remove: unary(log, 'MariaDb.Remove', (req: MariaDbInstanceCommand) =>
        once('remove', req.op_id, req.port, async () => {
          await desired.forget(checkPort(req.port));
          return removeInstance(ctx, req.port);
        }),
      ),
      ConfigureReplication: unary(log, 'MariaDb.ConfigureReplication', (req: MariaDbReplicationRequest) =>
        once('replication', req.op_id, req.port, () => configureReplication(ctx, req)),
      ),
      RebuildStandby: unary(log, 'MariaDb.RebuildStandby', (req: MariaDbRebuildRequest) =>
        once('rebuild', req.op_id, req.spec?.port ?? 0, () => desired.runningAfter(req.spec?.port, () => rebuildStandby(ctx, req))),
      ),
      StreamBackup: streamBackupHandler({ ...ctx, logger: log }),
      GetVariables: unary(log, 'MariaDb.GetVariables', (req: MariaDbVariablesRequest) => readVariables(ctx, req)),
      ListTables: unary(log, 'MariaDb.ListTables', (req: MariaDbListTablesRequest) => listClusterTables(ctx, req)),
      Probe: unary(log, 'MariaDb.Probe', (req: MariaDbProbeRequest) => mariadbProbeReply(ctx, req.port)),
      PrepareEngine: unary(log, 'MariaDb.PrepareEngine', (req: MariaDbPrepareEngineRequest) =>
        ctx.ops.run(`mariadb.prepare-engine.${req.op_id}`, () => prepareEngineReply(ctx, 'mariadb', req.version)),
      ),
      // Leaves the instance running under its new engine: wanted running from then on.
      UpgradeEngine: unary(log, 'MariaDb.UpgradeEngine', (req: MariaDbUpgradeEngineRequest) =>
        once('upgrade-engine', req.op_id, req.port, () => desired.runningAfter(req.port, () => upgradeEngine(ctx, req))),
      ),
    });
    registerMariaDbHa(server, ctx, { once, desired, serialised });
    registerRestoreService(server, ctx, log, { once, runningAfter: desired.runningAfter });
  },
};

// The ShardDataAgent service (proto/agent-shard-data.proto): a table move's data work run by
// agents, so rows never pass through a manager. The agent of the source master's host copies
// (CopyRows) and reads its master's binlog (the catch-ups); the agent of the target master's
// host compares (Compare); any agent holds sessions on its host's masters for the manager's
// control statements (sessions.ts).

import type * as grpc from '@grpc/grpc-js';
import { agentStatusOf, AgentFailure, ShardDataAgentService, stringifyValues, type CatchUpToRequest, type CloseSessionRequest, type CompareReply, type CompareRequest, type CopyRowsProgress, type CopyRowsRequest, type MoveRef, type OpenSessionRequest, type SessionQueryRequest, type StartCatchUpRequest } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import { CatchUps, type CatchUpOptions } from './catch-ups';
import { compareTarget } from './compare';
import { CopyRuns } from './copy-runs';
import { ShardSessions } from './sessions';
import { jsonArray } from './request-json';
import { addressOf, closeShard, instanceFailure, openShard } from './shard-sql';

/** The Compare rpc: the target on this host's master, against every source. */
async function compare(req: CompareRequest): Promise<CompareReply> {
  if (!req.target?.login || req.sources.length === 0 || req.sources.some((s) => !s.login)) throw new AgentFailure('invalid_argument', 'Compare needs a target and at least one source, each with a login');
  if (!req.shape || req.shape.key.length === 0) throw new AgentFailure('invalid_argument', 'the shape needs a primary key');
  if (!(req.chunk_rows > 0) && !req.keys_json) throw new AgentFailure('invalid_argument', `chunk_rows ${req.chunk_rows} must be at least 1`);
  const keys = req.keys_json ? (jsonArray('keys_json', req.keys_json) as unknown[][]) : null;
  if (keys !== null && (!Array.isArray(keys) || keys.some((k) => !Array.isArray(k) || k.length !== req.shape.key.length))) throw new AgentFailure('invalid_argument', `keys_json must be a JSON array of keys of ${req.shape.key.length} value(s)`);
  const opened: Awaited<ReturnType<typeof openShard>>[] = [];
  try {
    const dst = await openShard(req.target.login);
    opened.push(dst);
    const sources = [];
    for (const s of req.sources) {
      const conn = await openShard(s.login);
      opened.push(conn);
      sources.push({ conn, table: s });
    }
    const out = await compareTarget(dst, req.target, sources, req.shape, req.chunk_rows, keys);
    return { source_rows: out.sourceRows, chunks: out.chunks, differing_json: stringifyValues(out.differing), ms: out.ms };
  } catch (err) {
    throw instanceFailure(`the comparison of ${req.target.db}.${req.target.table} on ${addressOf(req.target.login)} with ${req.sources.map((s) => addressOf(s.login)).join(', ')}`, err);
  } finally {
    await Promise.all(opened.map(closeShard));
  }
}

function copyRowsHandler(log: Logger, copies: CopyRuns): grpc.handleServerStreamingCall<CopyRowsRequest, CopyRowsProgress> {
  return (call) => {
    const cancelled = new AbortController();
    call.on('cancelled', () => cancelled.abort(new Error('the CopyRows call was cancelled')));
    copies.run(call.request, cancelled.signal, (p) => void call.write(p)).then(
      (last) => {
        call.write(last);
        call.end();
      },
      (err: unknown) => {
        if (cancelled.signal.aborted) return; // nobody listens
        log.error({ err, rpc: 'ShardData.CopyRows', move_id: call.request.move_id }, 'move copy failed');
        // grpc-js turns an 'error' event on a server stream into the call's final status.
        call.emit('error', { code: agentStatusOf(err), details: err instanceof Error ? err.message : String(err) });
      },
    );
  };
}

/** The service's state, for tests that look inside (what runs) and a clean stop. */
export interface ShardDataService {
  sessions: ShardSessions;
  copies: CopyRuns;
  catchUps: CatchUps;
}

export function registerShardData(server: grpc.Server, ctx: AgentContext, options: CatchUpOptions = {}): ShardDataService {
  const log = ctx.logger.child({ capability: 'shard-data' });
  const sessions = new ShardSessions();
  const copies = new CopyRuns();
  const catchUps = new CatchUps(log, options);
  server.addService(ShardDataAgentService.service, {
    OpenSession: unary(log, 'ShardData.OpenSession', async (req: OpenSessionRequest) => {
      if (!req.login) throw new AgentFailure('invalid_argument', 'OpenSession needs a login');
      return { session_id: await sessions.open(req.login, req.database) };
    }),
    SessionQuery: unary(log, 'ShardData.SessionQuery', async (req: SessionQueryRequest) => ({ result_json: await sessions.query(req.session_id, req.sql, req.values_json, req.rows_as_array) })),
    CloseSession: unary(log, 'ShardData.CloseSession', async (req: CloseSessionRequest) => ({ closed: await sessions.close(req.session_id) })),
    CopyRows: copyRowsHandler(log, copies),
    StartCatchUp: unary(log, 'ShardData.StartCatchUp', (req: StartCatchUpRequest) => catchUps.start(req)),
    CatchUpTo: unary(log, 'ShardData.CatchUpTo', (req: CatchUpToRequest) => catchUps.to(req)),
    CatchUpTail: unary(log, 'ShardData.CatchUpTail', (req: CatchUpToRequest) => catchUps.tail(req)),
    SourcePosition: unary(log, 'ShardData.SourcePosition', (req: MoveRef) => catchUps.sourcePosition(req.move_id)),
    HaltCatchUp: unary(log, 'ShardData.HaltCatchUp', (req: MoveRef) => catchUps.halt(req.move_id)),
    StopCatchUp: unary(log, 'ShardData.StopCatchUp', (req: MoveRef) => catchUps.stop(req.move_id)),
    Compare: unary(log, 'ShardData.Compare', compare),
  });
  return { sessions, copies, catchUps };
}

export const shardDataCapability: CapabilityModule = {
  name: 'shard-data',
  register(server: grpc.Server, ctx: AgentContext) {
    registerShardData(server, ctx);
  },
};

// The manager's side of the ShardDataAgent service (proto/agent-shard-data.proto): a
// move's copy, catch-up and comparison run by agents, and sessions on a shard master held
// by the agent of its host for the manager's control statements.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary, listenToStream } from '../call';
import {
  ShardDataAgentService,
  type BinlogPosition,
  type CatchUpState,
  type CatchUpTailReply,
  type CompareReply,
  type CompareRequest,
  type CopyRowsProgress,
  type CopyRowsRequest,
  type ShardLogin,
  type StartCatchUpRequest,
} from '../contract/shard-data';
import { parseValues, stringifyValues } from '../values';

export interface ShardDataDeadlines {
  /** Sessions and catch-up commands that answer at once (ms). */
  callMs?: number;
}

export class ShardDataAgentClient {
  private readonly client: grpc.Client;
  private readonly callMs: number;

  constructor(readonly address: string, deadlines: ShardDataDeadlines = {}) {
    this.client = agentClient(ShardDataAgentService, address);
    this.callMs = deadlines.callMs ?? 30_000;
  }

  async openSession(login: ShardLogin, database = ''): Promise<string> {
    const reply = await callUnary<{ session_id: string }>(this.client, this.address, 'OpenSession', { login, database }, this.callMs);
    return reply.session_id;
  }

  /** One statement in the session: SELECT rows (arrays when `rowsAsArray`), or a result header. */
  async sessionQuery<T = unknown>(sessionId: string, sql: string, values: unknown[] = [], rowsAsArray = false, deadlineMs = this.callMs): Promise<T> {
    const reply = await callUnary<{ result_json: string }>(this.client, this.address, 'SessionQuery', { session_id: sessionId, sql, values_json: stringifyValues(values), rows_as_array: rowsAsArray }, deadlineMs);
    return parseValues<T>(reply.result_json);
  }

  async closeSession(sessionId: string): Promise<void> {
    await callUnary(this.client, this.address, 'CloseSession', { session_id: sessionId }, this.callMs);
  }

  /**
   * The copy, to its end: `onProgress` for each target commit; resolves with the last
   * message (done). Aborting `signal` cancels the call, which stops the copy in the agent.
   */
  async copyRows(request: CopyRowsRequest, onProgress: (p: CopyRowsProgress) => void, signal: AbortSignal): Promise<CopyRowsProgress> {
    let last: CopyRowsProgress | undefined;
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await listenToStream<CopyRowsProgress>(this.client, this.address, 'CopyRows', request, (p) => {
        last = p;
        if (p.done) stop.abort();
        else onProgress(p);
      }, stop.signal);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    if (signal.aborted) throw signal.reason ?? new Error('aborted');
    if (!last?.done) throw new Error(`the copy on ${this.address} ended without its last message`);
    return last;
  }

  startCatchUp(request: StartCatchUpRequest): Promise<CatchUpState> {
    return callUnary(this.client, this.address, 'StartCatchUp', request, this.callMs);
  }

  /** Waits until the catch-up applied `at` (null: the source's position now); the call's deadline is the wait's plus a margin. */
  catchUpTo(moveId: string, at: BinlogPosition | null, timeoutMs: number): Promise<CatchUpState> {
    return callUnary(this.client, this.address, 'CatchUpTo', { move_id: moveId, at: at ?? { file: '', pos: 0 }, timeout_ms: timeoutMs }, timeoutMs + 5_000);
  }

  catchUpTail(moveId: string, at: BinlogPosition, timeoutMs: number): Promise<CatchUpTailReply> {
    return callUnary(this.client, this.address, 'CatchUpTail', { move_id: moveId, at, timeout_ms: timeoutMs }, timeoutMs + 5_000);
  }

  sourcePosition(moveId: string): Promise<BinlogPosition> {
    return callUnary(this.client, this.address, 'SourcePosition', { move_id: moveId }, this.callMs);
  }

  haltCatchUp(moveId: string): Promise<CatchUpState> {
    return callUnary(this.client, this.address, 'HaltCatchUp', { move_id: moveId }, this.callMs);
  }

  stopCatchUp(moveId: string): Promise<CatchUpState> {
    return callUnary(this.client, this.address, 'StopCatchUp', { move_id: moveId }, this.callMs);
  }

  /** The comparison can read a whole table: no deadline beyond `deadlineMs` (default 6 h). */
  async compare(request: Omit<CompareRequest, 'keys_json'>, keys: unknown[][] | null, deadlineMs = 6 * 3600_000): Promise<{ sourceRows: number[]; chunks: number; differing: unknown[][]; ms: number }> {
    const reply = await callUnary<CompareReply>(this.client, this.address, 'Compare', { ...request, keys_json: keys === null ? '' : stringifyValues(keys) }, deadlineMs);
    return { sourceRows: reply.source_rows, chunks: reply.chunks, differing: parseValues<unknown[][]>(reply.differing_json) ?? [], ms: reply.ms };
  }

  close(): void {
    this.client.close();
  }
}

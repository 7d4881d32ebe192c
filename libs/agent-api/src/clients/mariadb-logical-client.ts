// The manager's side of the MariaDbLogicalAgent service: a dump read as a stream of
// chunks, a load fed from one. One client per operation (close() when done): a dump or a
// load outlives any pooled client's idle timer, and they are rare.

import type * as grpc from '@grpc/grpc-js';
import { agentClient } from '../call';
import { MariaDbLogicalAgentService, type LogicalDumpChunk, type LogicalDumpRequest, type LogicalLoadChunk, type LogicalLoadReply } from '../contract/mariadb-logical';
import { agentCallFailure } from '../errors';

/** Naming a dump's tables is two catalog queries: an agent that has not answered in this long is not going to. */
const LIST_DEADLINE_MS = 60_000;

export interface LogicalDumpParams {
  port: number;
  databases?: string[];
  databasePrefix?: string;
  tables?: string[];
}

/** A dump under way: what it holds, and its bytes (the stream fails as the agent's call did). */
export interface LogicalDump {
  /** `database.table` of every table in the dump. */
  tables: string[];
  data: AsyncIterable<Buffer>;
  /** Stops the dump on the agent (mariadb-dump is killed). */
  cancel(): void;
}

type DumpStub = { Dump(req: LogicalDumpRequest, opts: grpc.CallOptions): grpc.ClientReadableStream<LogicalDumpChunk> };
type LoadStub = {
  Load(opts: grpc.CallOptions, callback: (err: grpc.ServiceError | null, reply: LogicalLoadReply) => void): grpc.ClientWritableStream<LogicalLoadChunk>;
};

export class MariaDbLogicalAgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 6 * 3600_000) {
    this.client = agentClient(MariaDbLogicalAgentService, address);
  }

  /**
   * The tables (`database.table`) a dump of `p` would hold on the instance, partitions of a
   * partitioned parent included; none when it holds nothing of it. Nothing is dumped.
   */
  async tablesOf(p: LogicalDumpParams): Promise<string[]> {
    const dump = await this.start(p, true, LIST_DEADLINE_MS);
    // The agent ends the call after the names; an agent from before list_only would go on
    // with the whole dump, which is not wanted here.
    dump.cancel();
    return dump.tables;
  }

  /** Starts a dump; resolves once the agent named the tables it holds. */
  dump(p: LogicalDumpParams): Promise<LogicalDump> {
    return this.start(p, false);
  }

  private async start(p: LogicalDumpParams, listOnly: boolean, deadlineMs = this.deadlineMs): Promise<LogicalDump> {
    const request: LogicalDumpRequest = { port: p.port, databases: p.databases ?? [], database_prefix: p.databasePrefix ?? '', tables: p.tables ?? [], list_only: listOnly };
    const call = (this.client as unknown as DumpStub).Dump(request, { deadline: Date.now() + deadlineMs });
    const address = this.address;
    const messages = (call as AsyncIterable<LogicalDumpChunk>)[Symbol.asyncIterator]();
    const mapped = <T>(p: Promise<T>) => p.catch((err: unknown) => Promise.reject(isServiceError(err) ? agentCallFailure(address, err) : err));
    const first = await mapped(messages.next());
    if (first.done) throw new Error(`agent at ${address} ended the dump without naming its tables`);
    async function* data(): AsyncGenerator<Buffer> {
      if (first.value.data.length > 0) yield first.value.data;
      for (;;) {
        const next = await mapped(messages.next());
        if (next.done) return;
        yield next.value.data;
      }
    }
    return { tables: first.value.tables, data: data(), cancel: () => call.cancel() };
  }

  /** Streams `data` into the instance on `port`; resolves with the agent's reply once it loaded all of it. */
  load(opId: string, port: number, data: AsyncIterable<Buffer>): Promise<LogicalLoadReply> {
    return new Promise<LogicalLoadReply>((resolve, reject) => {
      const call = (this.client as unknown as LoadStub).Load({ deadline: Date.now() + this.deadlineMs }, (err, reply) => {
        if (err) reject(agentCallFailure(this.address, err));
        else resolve(reply);
      });
      void (async () => {
        call.write({ header: { op_id: opId, port }, data: Buffer.alloc(0) });
        for await (const chunk of data) {
          if (!call.write({ data: chunk })) await new Promise((r) => call.once('drain', r));
        }
        call.end();
      })().catch((err: unknown) => {
        call.cancel();
        reject(new Error(`reading the dump to load failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
      });
    });
  }

  close(): void {
    this.client.close();
  }
}

function isServiceError(err: unknown): err is grpc.ServiceError {
  return err instanceof Error && typeof (err as Partial<grpc.ServiceError>).code === 'number' && 'metadata' in err;
}

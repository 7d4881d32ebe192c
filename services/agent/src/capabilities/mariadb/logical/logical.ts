// The MariaDbLogicalAgent service (proto/agent-mariadb-logical.proto): logical copies of
// databases and tables.
//
//   Dump: mariadb-dump --single-transaction (one consistent snapshot, no locks held) -> chunks
//         (list_only: the names of what it would dump, and nothing else)
//   Load: chunks -> mariadb (the client) on the instance's socket
//
// Both tools log in as root over the instance's socket (unix_socket auth; the agent runs
// as root), so no password is on any command line. A stream ends OK only when its tool
// exited 0; a cancelled call kills the tool.

import * as grpc from '@grpc/grpc-js';
import type { AgentContext, CapabilityModule } from '../../../capability';
import { spawnPiped } from '../../../ops/exec';
import { agentStatusOf, AgentFailure, MariaDbLogicalAgentService, type LogicalDumpChunk, type LogicalDumpRequest, type LogicalLoadChunk, type LogicalLoadReply } from '@kcm/agent-api';
import { drainOrCancel } from '../backup/backup-stream';
import { checkPort, type InstanceLayout } from '../instance/instance-layout';
import { layoutOf, runningPid } from '../instance/lifecycle';
import { dumpObjectArgs, resolveDumpObjects, tableDumpPreamble } from './logical-objects';

const LOGICAL_TIMEOUT_MS = 6 * 3600_000;
export const logicalTools = { dump: '/usr/bin/mariadb-dump', client: '/usr/bin/mariadb' };

async function runningLayout(ctx: AgentContext, port: number): Promise<InstanceLayout> {
  const layout = await layoutOf(ctx, checkPort(port));
  if (!(await runningPid(layout))) throw new AgentFailure('failed_precondition', `instance on port ${layout.port} is not running`);
  return layout;
}

const socketLogin = (layout: InstanceLayout) => ['--no-defaults', '--user=root', `--socket=${layout.socket}`];

async function sendDump(ctx: AgentContext, call: grpc.ServerWritableStream<LogicalDumpRequest, LogicalDumpChunk>): Promise<void> {
  const layout = await runningLayout(ctx, call.request.port);
  const objects = await resolveDumpObjects(layout, call.request);
  if (call.request.list_only) {
    call.write({ tables: objects.tableNames, data: Buffer.alloc(0) });
    call.end();
    return;
  }
  const abort = new AbortController();
  call.on('cancelled', () => abort.abort());
  const started = Date.now();
  const dump = spawnPiped(
    logicalTools.dump,
    [...socketLogin(layout), '--single-transaction', '--quick', '--hex-blob', '--default-character-set=utf8mb4', '--triggers', ...dumpObjectArgs(objects)],
    { input: 'ignore', output: 'pipe', timeoutMs: LOGICAL_TIMEOUT_MS, signal: abort.signal },
  );
  let bytes = 0;
  const send = async (data: Buffer, tables: string[] = []) => {
    bytes += data.length;
    if (!call.write({ tables, data })) await drainOrCancel(call);
    if (abort.signal.aborted) throw new Error('the receiver cancelled the dump');
  };
  try {
    await send(Buffer.alloc(0), objects.tableNames);
    const preamble = tableDumpPreamble(objects);
    if (preamble.length > 0) await send(preamble);
    for await (const piece of dump.stdout) await send(piece as Buffer);
    await dump.done;
  } catch (err) {
    dump.kill();
    throw err;
  }
  call.end();
  ctx.logger.info({ port: layout.port, databases: objects.databases, tables: objects.tableNames.length, bytes, ms: Date.now() - started }, 'logical dump streamed');
}

async function receiveLoad(ctx: AgentContext, call: grpc.ServerReadableStream<LogicalLoadChunk, LogicalLoadReply>): Promise<LogicalLoadReply> {
  const messages = (call as AsyncIterable<LogicalLoadChunk>)[Symbol.asyncIterator]();
  const first = await messages.next();
  const header = first.done ? undefined : first.value.header;
  if (!header) throw new AgentFailure('invalid_argument', 'the first message of a load must carry its header');
  const layout = await runningLayout(ctx, header.port);
  const started = Date.now();
  const client = spawnPiped(logicalTools.client, [...socketLogin(layout), '--binary-mode', '--batch'], { input: 'pipe', output: 'ignore', timeoutMs: LOGICAL_TIMEOUT_MS });
  call.on('cancelled', () => client.kill());
  const clientDied = client.done.then(() => {
    throw new Error('mariadb exited before the dump ended');
  });
  clientDied.catch(() => {});
  let bytes = 0;
  const feed = async (data: Buffer) => {
    bytes += data.length;
    if (data.length > 0 && !client.stdin.write(data)) await Promise.race([new Promise((r) => client.stdin.once('drain', r)), clientDied]);
  };
  try {
    await feed(first.value!.data);
    for (let next = await messages.next(); !next.done; next = await messages.next()) await feed(next.value.data);
    client.stdin.end();
    await client.done;
  } catch (err) {
    client.kill();
    throw err;
  }
  ctx.logger.info({ op_id: header.op_id, port: layout.port, bytes, ms: Date.now() - started }, 'logical dump loaded');
  return { bytes, elapsed_ms: Date.now() - started };
}

export const mariadbLogicalModule: CapabilityModule = {
  name: 'mariadb-logical',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'mariadb-logical' });
    const failed = (rpc: string, err: unknown) => {
      log.error({ err, rpc }, 'logical command failed');
      return { code: agentStatusOf(err), details: err instanceof Error ? err.message : String(err) };
    };
    server.addService(MariaDbLogicalAgentService.service, {
      Dump: (call: grpc.ServerWritableStream<LogicalDumpRequest, LogicalDumpChunk>) => {
        // grpc-js turns an 'error' event on a server stream into the call's final status.
        sendDump({ ...ctx, logger: log }, call).catch((err: unknown) => call.emit('error', failed('MariaDbLogical.Dump', err)));
      },
      Load: (call: grpc.ServerReadableStream<LogicalLoadChunk, LogicalLoadReply>, callback: grpc.sendUnaryData<LogicalLoadReply>) => {
        receiveLoad({ ...ctx, logger: log }, call).then(
          (reply) => callback(null, reply),
          (err: unknown) => callback(failed('MariaDbLogical.Load', err)),
        );
      },
    });
  },
};

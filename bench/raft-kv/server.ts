// One raft-kv member as a process: RaftNode + LevelStorage + GrpcTransport for Raft, and
// the Kv gRPC service (proto/raftkv.proto) on a second port. Started by cluster.ts with
// one JSON argument (ServerConfig); prints `READY <json>` on stdout once serving.
//
// Puts: proposed here when this member leads; on a follower forwarded once to the
// leader's Kv service over a pipelined stream (a forwarded put is never forwarded again,
// so a stale hint cannot loop). Gets: linearizable, served locally after read() (ReadIndex).
//
// For the kill test, every (term, vote) this member persists is appended to
// `<dataDir>/hardstate.log` before any message of that Ready leaves, together with the
// state found on each start, so a checker can prove no member voted twice in a term and
// no member's term went back across restarts.

import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { inspect } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { RaftError, NotLeaderError } from '../../libs/raft/src/core/errors';
import type { HardState, NodeId } from '../../libs/raft/src/core/types';
import { GrpcTransport } from '../../libs/raft/src/grpc-transport';
import { LevelStorage } from '../../libs/raft/src/level-storage';
import { RaftNode } from '../../libs/raft/src/node';
import { KvSession, errorReply } from './kv-client';
import { kvService } from './kv-proto';
import type { KvErrorCode, KvReply, KvReplyBatch, KvRequest, KvRequestBatch, StatusReply, TransferLeaderReply, TransferLeaderRequest } from './kv-proto';
import { KvStateMachine, encodePut } from './kv-state';
import { callerGuard, channelCredentials, loadTlsMaterial, serverCredentials, useTls, type TlsFiles } from '@kcm/agent-api';

export interface ServerConfig {
  /** Raft id and listen address ('host:port'). */
  id: NodeId;
  /** This member's Kv service address. */
  kv: string;
  dataDir: string;
  /** Every member of the group (this one included): Raft id -> Kv address. */
  members: Record<NodeId, string>;
  tickMs?: number;
  electionTick?: number;
  snapshotEntries?: number;
  requestTimeoutMs?: number;
  /** Mutual TLS files (a manager-role certificate), as kcm's managers run; plaintext when absent. */
  tls?: TlsFiles;
}

export interface HardStateLogLine {
  term: number;
  vote: string | null;
  /** True for the state found in storage when the process started. */
  start?: boolean;
  pid: number;
}

/**
 * The configuration: argv[2], or with `--standby` the first line of stdin. A standby
 * process has loaded every module before it is needed, so a restart in the kill test
 * costs what opening the storage costs, not a Node and TypeScript boot.
 */
async function readConfig(): Promise<ServerConfig> {
  if (process.argv[2] !== '--standby') return JSON.parse(process.argv[2] ?? '') as ServerConfig;
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return JSON.parse(line) as ServerConfig;
  }
  process.exit(0); // stdin closed: the spare is not needed any more
}

async function main(): Promise<void> {
  const config = await readConfig();
  if (config.tls) useTls(loadTlsMaterial(config.tls, 'manager'));
  // Both ports check the caller's role on every call, as a manager's do.
  const guard = callerGuard({ kind: 'managers' });
  const requestTimeoutMs = config.requestTimeoutMs ?? 5_000;
  const voters = Object.keys(config.members);
  const storage = await LevelStorage.open(join(config.dataDir, 'raft'), { bootstrap: { voters, learners: [] } });
  const hardStateLog = new HardStateLog(join(config.dataDir, 'hardstate.log'), storage.initialState().hardState);

  const sm = new KvStateMachine();
  // Loopback peers come back within a second of a restart: reconnect quickly.
  const transport = new GrpcTransport({
      channelCredentials: channelCredentials(), serverCredentials: serverCredentials(), serverInterceptors: [guard],
    id: config.id,
    listen: config.id,
    peers: peersOf(config),
    backoff: { minMs: 20, maxMs: 250 },
  });
  const node = await RaftNode.start({
    id: config.id,
    storage,
    transport,
    stateMachine: sm,
    tickMs: config.tickMs ?? 100,
    electionTick: config.electionTick ?? 10,
    heartbeatTick: 1,
    snapshotEntries: config.snapshotEntries ?? 100_000,
    logger: stderrLogger,
  });
  node.on('fatal', () => process.exit(1)); // a member that cannot persist must not linger
  node.on('hardStatePersisted', (hs) => hardStateLog.record(hs));

  const forwarders = new Map<string, KvSession>();
  const leaderKv = (leader: NodeId | null): string => (leader ? (config.members[leader] ?? '') : '');
  const forwarderTo = (address: string): KvSession => {
    let session = forwarders.get(address);
    if (!session) forwarders.set(address, (session = new KvSession(address)));
    return session;
  };

  async function put(req: KvRequest): Promise<KvReply> {
    const leader = node.knownLeader;
    if (leader && leader !== config.id && !req.forwarded) return forward(req, leader);
    try {
      const index = (await node.propose(encodePut(req.key, req.value ?? new Uint8Array()), { timeoutMs: requestTimeoutMs })) as number;
      return { ...errorReply(req.id, '', ''), index };
    } catch (err) {
      if (err instanceof NotLeaderError && err.leader && err.leader !== config.id && !req.forwarded) return forward(req, err.leader);
      return replyForError(req.id, err);
    }
  }

  async function forward(req: KvRequest, leader: NodeId): Promise<KvReply> {
    const reply = await forwarderTo(leaderKv(leader)).put(req.key, req.value ?? new Uint8Array(), {
      timeoutMs: requestTimeoutMs,
      forwarded: true,
    });
    return { ...reply, id: req.id };
  }

  async function get(req: KvRequest): Promise<KvReply> {
    try {
      await node.read({ timeoutMs: requestTimeoutMs });
      const value = sm.get(req.key);
      return { ...errorReply(req.id, '', ''), found: value !== undefined, value: value ?? Buffer.alloc(0) };
    } catch (err) {
      return replyForError(req.id, err);
    }
  }

  function replyForError(id: number, err: unknown): KvReply {
    if (err instanceof NotLeaderError) return errorReply(id, err.leader ? 'NOT_LEADER' : 'NO_LEADER', err.message, leaderKv(err.leader));
    if (err instanceof RaftError) return errorReply(id, kvCodeOf(err.code), err.message, leaderKv(node.status().leader));
    return errorReply(id, 'INTERNAL', String(err));
  }

  function session(call: grpc.ServerDuplexStream<KvRequestBatch, KvReplyBatch>): void {
    let outbox: KvReply[] = [];
    let open = true;
    const send = (reply: KvReply) => {
      if (!open) return;
      // Replies completed in the same turn (one apply batch) leave as one message.
      if (outbox.push(reply) === 1) {
        queueMicrotask(() => {
          const replies = outbox;
          outbox = [];
          if (open) call.write({ replies });
        });
      }
    };
    call.on('data', (batch: KvRequestBatch) => {
      for (const req of batch.requests) void (req.op === 'GET' ? get(req) : put(req)).then(send);
    });
    const close = () => {
      if (!open) return;
      open = false;
      call.end();
    };
    call.on('end', close);
    call.on('error', close);
    call.on('cancelled', close);
  }

  function status(_call: grpc.ServerUnaryCall<unknown, StatusReply>, callback: grpc.sendUnaryData<StatusReply>): void {
    const s = node.status();
    const writes = storage.stats();
    callback(null, {
      id: config.id,
      term: s.term,
      vote: s.vote ?? '',
      commit: s.commit,
      applied: s.applied,
      leader: s.leader ?? '',
      role: s.role,
      lastIndex: s.lastIndex,
      storageWrites: writes.writes,
      storageSyncedWrites: writes.syncedWrites,
      keys: sm.size,
      pid: process.pid,
    });
  }

  function transferLeader(
    call: grpc.ServerUnaryCall<TransferLeaderRequest, TransferLeaderReply>,
    callback: grpc.sendUnaryData<TransferLeaderReply>,
  ): void {
    if (node.knownLeader !== config.id) return callback(null, { error: 'NOT_LEADER' });
    node.transferLeader(call.request.to);
    callback(null, { error: '' });
  }

  const server = new grpc.Server({ 'grpc.keepalive_time_ms': 10_000, interceptors: [guard] });
  server.addService(kvService, { Session: session, Status: status, TransferLeader: transferLeader });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(config.kv, serverCredentials(), (err) => (err ? reject(err) : resolve())),
  );

  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    server.forceShutdown();
    for (const f of forwarders.values()) f.close();
    await node.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown());
  process.on('SIGINT', () => void shutdown());
  process.stdout.write(`READY ${JSON.stringify({ id: config.id, kv: config.kv, pid: process.pid })}\n`);
}

/** Warnings and errors go to stderr, which cluster.ts keeps as `<dataDir>/server.log`. */
const stderrLogger = {
  info() {},
  warn: (obj: object, msg?: string) => process.stderr.write(`WARN ${msg ?? ''} ${inspect(obj)}\n`),
  error: (obj: object, msg?: string) => process.stderr.write(`ERROR ${msg ?? ''} ${inspect(obj)}\n`),
};

function peersOf(config: ServerConfig): Record<NodeId, string> {
  const peers: Record<NodeId, string> = {};
  for (const id of Object.keys(config.members)) if (id !== config.id) peers[id] = id;
  return peers;
}

function kvCodeOf(raftCode: string): KvErrorCode {
  switch (raftCode) {
    case 'TIMEOUT':
    case 'DROPPED':
    case 'OVERLOADED':
    case 'STOPPED':
      return raftCode;
    default:
      return 'INTERNAL';
  }
}

/** Appends (term, vote) whenever either changes; synchronous so it lands before the Ready's messages leave. */
class HardStateLog {
  private last: { term: number; vote: string | null };

  constructor(
    private readonly path: string,
    initial: HardState,
  ) {
    this.last = { term: initial.term, vote: initial.vote };
    this.append({ term: initial.term, vote: initial.vote, start: true, pid: process.pid });
  }

  record(hs: HardState): void {
    if (hs.term === this.last.term && hs.vote === this.last.vote) return;
    this.last = { term: hs.term, vote: hs.vote };
    this.append({ term: hs.term, vote: hs.vote, pid: process.pid });
  }

  private append(line: HardStateLogLine): void {
    appendFileSync(this.path, `${JSON.stringify(line)}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`raft-kv server failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

// A client of one raft-kv member over one long-lived Session stream: many requests in
// flight, matched to replies by id. Used by the load generator, the kill test and by
// followers forwarding puts to the leader.
//
// Every call resolves with a KvReply, never rejects: transport failures become
// error 'UNAVAILABLE' and a missing reply error 'TIMEOUT'; both mean the outcome of a
// put is unknown (it may have been applied).

import type * as grpc from '@grpc/grpc-js';
import { newKvClient } from './kv-proto';
import type { KvErrorCode, KvReply, KvReplyBatch, KvRequest, KvRequestBatch, KvServiceClient, StatusReply, TransferLeaderReply } from './kv-proto';

interface Pending {
  resolve: (r: KvReply) => void;
  timer: NodeJS.Timeout;
}

export function errorReply(id: number, error: KvErrorCode, message: string, leaderKv = ''): KvReply {
  return { id, error, message, leaderKv, index: 0, found: false, value: Buffer.alloc(0) };
}

export class KvSession {
  private readonly client: KvServiceClient;
  private stream: grpc.ClientDuplexStream<KvRequestBatch, KvReplyBatch> | undefined;
  private readonly pending = new Map<number, Pending>();
  private outbox: KvRequest[] = [];
  private flushScheduled = false;
  private nextId = 1;
  private closed = false;

  constructor(readonly address: string) {
    this.client = newKvClient(address);
  }

  put(key: string, value: Uint8Array, options: { timeoutMs?: number; forwarded?: boolean } = {}): Promise<KvReply> {
    return this.request({ op: 'PUT', key, value, forwarded: options.forwarded ?? false }, options.timeoutMs);
  }

  get(key: string, options: { timeoutMs?: number } = {}): Promise<KvReply> {
    return this.request({ op: 'GET', key }, options.timeoutMs);
  }

  status(timeoutMs = 2_000): Promise<StatusReply> {
    return new Promise((resolve, reject) => {
      this.client.Status({}, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(err) : resolve(reply!)));
    });
  }

  /** Asks this member to hand leadership to `to`; resolves with '' when it leads and started the transfer. */
  transferLeader(to: string, timeoutMs = 2_000): Promise<TransferLeaderReply['error']> {
    return new Promise((resolve, reject) => {
      this.client.TransferLeader({ to }, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(err) : resolve(reply!.error)));
    });
  }

  close(): void {
    this.closed = true;
    this.failAll('UNAVAILABLE', 'session closed');
    this.stream?.end();
    this.stream = undefined;
    this.client.close();
  }

  private request(req: Omit<KvRequest, 'id'>, timeoutMs = 5_000): Promise<KvReply> {
    const id = this.nextId++;
    if (this.closed) return Promise.resolve(errorReply(id, 'UNAVAILABLE', 'session closed'));
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve(errorReply(id, 'TIMEOUT', `no reply from ${this.address} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, timer });
      this.outbox.push({ ...req, id });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => this.flush());
      }
    });
  }

  /** Requests made in the same turn (before its microtasks run out) leave as one stream message. */
  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0 || this.closed) return;
    const requests = this.outbox;
    this.outbox = [];
    this.openStream().write({ requests });
  }

  private openStream(): grpc.ClientDuplexStream<KvRequestBatch, KvReplyBatch> {
    if (this.stream) return this.stream;
    const stream = this.client.Session();
    stream.on('data', (batch: KvReplyBatch) => {
      for (const reply of batch.replies) {
        const p = this.pending.get(reply.id);
        if (!p) continue;
        this.pending.delete(reply.id);
        clearTimeout(p.timer);
        p.resolve(reply);
      }
    });
    const broken = (why: string) => {
      if (this.stream !== stream) return;
      this.stream = undefined;
      // Requests written to the dead stream may or may not have been served.
      this.failAll('UNAVAILABLE', `stream to ${this.address} broke: ${why}`);
    };
    stream.on('error', (err: Error) => broken(err.message));
    stream.on('end', () => broken('server ended the stream'));
    this.stream = stream;
    return stream;
  }

  private failAll(code: KvErrorCode, message: string): void {
    this.outbox = [];
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.resolve(errorReply(id, code, message));
    }
    this.pending.clear();
  }
}

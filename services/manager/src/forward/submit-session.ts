// One follower's Submit stream to one leader (proto/manager-forward.proto): many
// submissions in flight, matched to replies by id; those made in the same event-loop turn
// leave as one stream message. A forwarded request used to be an HTTP request of its own
// that the leader's gateway parsed, logged and answered again: about half a millisecond
// of CPU per job over both members, and 1.2 ms of latency (bench/emit).
//
// A submission resolves with the leader's reply or rejects (stream broken, no reply in
// time, session closed); after a rejection its outcome is unknown: the job may exist.

import type * as grpc from '@grpc/grpc-js';
import { newForwardClient, type ForwardClient, type SubmitBatch, type SubmitReply, type SubmitReplyBatch, type SubmitRequest } from './forward-proto';

interface Pending {
  resolve: (reply: SubmitReply) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class SubmitSession {
  private readonly client: ForwardClient;
  private stream: grpc.ClientDuplexStream<SubmitBatch, SubmitReplyBatch> | undefined;
  private readonly pending = new Map<number, Pending>();
  private outbox: SubmitRequest[] = [];
  private flushScheduled = false;
  private nextId = 1;
  private closed = false;

  constructor(readonly address: string) {
    this.client = newForwardClient(address);
  }

  /** Submissions sent and not answered yet. */
  get inFlight(): number {
    return this.pending.size;
  }

  submit(request: Omit<SubmitRequest, 'id'>, timeoutMs: number): Promise<SubmitReply> {
    if (this.closed) return Promise.reject(new Error('session closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.outbox.push({ ...request, id });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => this.flush());
      }
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.failAll('session closed');
    this.stream?.end();
    this.stream = undefined;
    this.client.close();
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0 || this.closed) return;
    const requests = this.outbox;
    this.outbox = [];
    this.openStream().write({ requests });
  }

  private openStream(): grpc.ClientDuplexStream<SubmitBatch, SubmitReplyBatch> {
    if (this.stream) return this.stream;
    const stream = this.client.Submit();
    stream.on('data', (batch: SubmitReplyBatch) => {
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
      this.failAll(`the stream to ${this.address} broke: ${why}`);
    };
    stream.on('error', (err: Error) => broken(err.message));
    stream.on('end', () => broken('the leader ended it'));
    this.stream = stream;
    return stream;
  }

  private failAll(why: string): void {
    this.outbox = [];
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error(why));
    }
    this.pending.clear();
  }
}

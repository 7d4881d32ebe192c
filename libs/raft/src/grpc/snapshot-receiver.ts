// The receiving side of SendSnapshot: assembles chunks into the complete image, keeps a
// partial transfer across broken streams (keyed by sender and snapshot term/index/size/
// checksum), tells a reconnecting sender where to resume, and delivers ONE complete Snap
// message after checking its length and SHA-256.

import { createHash, type Hash } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import type { Message, NodeId } from '../core/types';
import { fromProtoMessage } from '../codec/message-codec';
import type { SnapshotAck, SnapshotChunk, SnapshotHeader } from './raft-proto';

export interface SnapshotReceiverOptions {
  selfId: NodeId;
  maxSnapshotBytes: number;
  /** Partial transfers untouched for this long are discarded. */
  partialTtlMs: number;
  deliver: (m: Message) => void;
  onReceived: () => void;
  warn: (fields: object, msg: string) => void;
}

interface PartialSnapshot {
  key: string;
  header: SnapshotHeader;
  image: Uint8Array;
  received: number;
  /** SHA-256 over image[0, received): chunks arrive in order, so it resumes with them. */
  hash: Hash;
  touchedAt: number;
  /** The stream currently feeding it; chunks from an older stream of the same sender are refused. */
  owner: object | undefined;
}

export class SnapshotReceiver {
  /** At most one partial transfer per sender: a newer snapshot replaces an older one. */
  private readonly partials = new Map<NodeId, PartialSnapshot>();

  constructor(private readonly options: SnapshotReceiverOptions) {}

  /** Bytes held for a sender's partial transfer (tests and stats). */
  partialBytes(from: NodeId): number {
    return this.partials.get(from)?.received ?? 0;
  }

  clear(): void {
    this.partials.clear();
  }

  readonly handle = (call: grpc.ServerDuplexStream<SnapshotChunk, SnapshotAck>): void => {
    const owner = {};
    let partial: PartialSnapshot | undefined;
    let ended = false;
    const endCall = (ack: SnapshotAck): void => {
      if (ended) return;
      ended = true;
      call.write(ack);
      call.end();
    };
    const refuse = (error: string, discardPartial = true): void => {
      this.options.warn({ error, from: partial?.header.message?.from }, 'snapshot transfer refused');
      if (partial && discardPartial) this.partials.delete(partial.header.message?.from ?? '');
      partial = undefined;
      endCall({ error });
    };
    call.on('data', (chunk: SnapshotChunk) => {
      if (ended) return;
      if (chunk.header) {
        const started = this.begin(chunk.header, owner);
        if (typeof started === 'string') return refuse(started);
        partial = started;
        call.write({ offset: partial.received });
        return;
      }
      if (!partial) return refuse('chunk before header');
      if (partial.owner !== owner) return refuse('superseded by a newer stream from the same sender', false);
      const problem = this.append(partial, chunk);
      if (problem) return refuse(problem);
      if (partial.received < partial.image.byteLength) {
        call.write({ offset: partial.received });
        return;
      }
      const complete = this.finish(partial);
      if (typeof complete === 'string') return refuse(complete);
      partial = undefined;
      try {
        this.options.onReceived();
        this.options.deliver(complete);
      } catch (err) {
        this.options.warn({ err }, 'snapshot handler threw');
      }
      endCall({ offset: complete.snapshot?.data.byteLength ?? 0, done: true });
    });
    // A broken stream keeps its partial for the sender's resume; nothing else to do.
    call.on('error', () => {});
    call.on('end', () => {
      if (!ended) {
        ended = true;
        call.end();
      }
    });
  };

  private begin(header: SnapshotHeader, owner: object): PartialSnapshot | string {
    const m = header.message;
    const total = header.totalSize ?? 0;
    const sha256 = header.sha256;
    if (!m || !m.from || !m.snapshot?.meta) return 'header without a Snap message';
    if (m.to !== this.options.selfId) return `snapshot addressed to ${m.to}, this is ${this.options.selfId}`;
    if (!sha256 || sha256.byteLength !== 32) return 'header without a SHA-256';
    if (total > this.options.maxSnapshotBytes) return `snapshot of ${total} bytes exceeds the limit of ${this.options.maxSnapshotBytes}`;
    this.expireStale();
    const meta = m.snapshot.meta;
    const key = `${meta.term ?? 0}/${meta.index ?? 0}/${total}/${Buffer.from(sha256).toString('hex')}`;
    const existing = this.partials.get(m.from);
    if (existing && existing.key === key) {
      existing.owner = owner;
      existing.touchedAt = Date.now();
      return existing;
    }
    const fresh: PartialSnapshot = {
      key, header, image: new Uint8Array(total), received: 0,
      hash: createHash('sha256'), touchedAt: Date.now(), owner,
    };
    this.partials.set(m.from, fresh);
    return fresh;
  }

  /** Appends a chunk at the partial's end; an overlap (resent bytes) is skipped, a gap refused. */
  private append(partial: PartialSnapshot, chunk: SnapshotChunk): string | undefined {
    const offset = chunk.offset ?? 0;
    const data = chunk.data ?? new Uint8Array(0);
    if (offset > partial.received) return `chunk at ${offset} leaves a gap after ${partial.received}`;
    const fresh = data.subarray(partial.received - offset);
    if (partial.received + fresh.byteLength > partial.image.byteLength) return 'chunk beyond the announced size';
    partial.image.set(fresh, partial.received);
    partial.hash.update(fresh);
    partial.received += fresh.byteLength;
    partial.touchedAt = Date.now();
    return undefined;
  }

  private finish(partial: PartialSnapshot): Message | string {
    const from = partial.header.message?.from ?? '';
    this.partials.delete(from);
    const expected = Buffer.from(partial.header.sha256 ?? new Uint8Array(0));
    if (!partial.hash.digest().equals(expected)) return 'snapshot checksum mismatch';
    const m = fromProtoMessage(partial.header.message ?? {});
    if (m.type !== 'Snap' || !m.snapshot) return 'header is not a Snap message';
    return { ...m, snapshot: { meta: m.snapshot.meta, data: partial.image } };
  }

  private expireStale(): void {
    const cutoff = Date.now() - this.options.partialTtlMs;
    for (const [from, p] of this.partials) if (p.touchedAt < cutoff) this.partials.delete(from);
  }
}

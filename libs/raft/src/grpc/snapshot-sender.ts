// Sends one peer its 'Snap' messages over SendSnapshot, in chunks, resuming after a
// break from the offset the receiver says it holds. One transfer at a time per peer;
// each 'Snap' given to send() ends in exactly one onSnapshotStatus(peer, ok) (except
// when the transport stops first).

import { createHash } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import { isStoredImage, type Message, type NodeId, type SnapshotImage, type StoredImageReader } from '../core/types';
import { toProtoMessage } from '../codec/message-codec';
import { Backoff, cancellableDelay } from './backoff';
import { awaitChannelReady } from './channel-ready';
import type { RaftClient, SnapshotAck, SnapshotChunk } from './raft-proto';

export interface SnapshotSenderOptions {
  chunkBytes: number;
  connectTimeoutMs: number;
  /** An attempt with no acknowledgement for this long is abandoned (peer stalled). */
  stallTimeoutMs: number;
  /** Attempts (first + resumes) before the transfer is reported failed. */
  maxAttempts: number;
  backoff: Backoff;
  onUnreachable: (reason: string) => void;
  onStatus: (ok: boolean) => void;
  onTransferEnd: (record: SnapshotTransferRecord) => void;
}

/** What one transfer did; kept by the transport for stats and tests. */
export interface SnapshotTransferRecord {
  peer: NodeId;
  index: number;
  term: number;
  bytes: number;
  /** Offset each attempt started from: [0] on a clean transfer, [0, 1310720] after one resume. */
  startOffsets: number[];
  ok: boolean;
  error?: string;
}

type AttemptResult = { kind: 'done' } | { kind: 'rejected'; error: string } | { kind: 'broken'; error: string };

export class PeerSnapshotSender {
  private pending: Message | undefined;
  private running = false;
  private readonly abort = new AbortController();

  constructor(
    readonly peer: NodeId,
    private readonly client: RaftClient,
    private readonly options: SnapshotSenderOptions,
  ) {}

  /** Queues a Snap; a newer one replaces a queued (not yet started) one, which is reported failed. */
  enqueue(m: Message): void {
    if (this.abort.signal.aborted) return;
    if (this.pending) this.options.onStatus(false);
    this.pending = m;
    if (!this.running) void this.run();
  }

  /**
   * Abandons the transfer in progress and the queued one, reporting each as failed so
   * the core sends a fresh snapshot later (the transport drops these reports once stopped).
   */
  close(): void {
    if (this.abort.signal.aborted) return;
    if (this.running) this.options.onStatus(false);
    if (this.pending) this.options.onStatus(false);
    this.pending = undefined;
    this.abort.abort();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.pending && !this.abort.signal.aborted) {
        const m = this.pending;
        this.pending = undefined;
        const record = await this.transfer(m);
        if (this.abort.signal.aborted) return;
        this.options.onTransferEnd(record);
        this.options.onStatus(record.ok);
      }
    } finally {
      this.running = false;
    }
  }

  private async transfer(m: Message): Promise<SnapshotTransferRecord> {
    const snapshot = m.snapshot;
    const record: SnapshotTransferRecord = {
      peer: this.peer, index: snapshot?.meta.index ?? 0, term: snapshot?.meta.term ?? 0,
      bytes: snapshot?.data.byteLength ?? 0, startOffsets: [], ok: false,
    };
    if (!snapshot) return { ...record, error: 'Snap message without a snapshot' };
    let source: ImageSource;
    try {
      source = await openSource(snapshot.data);
    } catch (err) {
      // A stored image replaced by a newer snapshot meanwhile: the core sends the newer one next.
      return { ...record, error: `snapshot image unreadable: ${(err as Error).message}` };
    }
    try {
      return await this.transferFrom(m, source, record);
    } finally {
      await source.close();
    }
  }

  private async transferFrom(m: Message, source: ImageSource, record: SnapshotTransferRecord): Promise<SnapshotTransferRecord> {
    const snapshot = m.snapshot!;
    let sha256: Uint8Array;
    try {
      sha256 = await source.sha256();
    } catch (err) {
      return { ...record, error: `snapshot image unreadable: ${(err as Error).message}` };
    }
    const header: SnapshotChunk = {
      header: {
        message: toProtoMessage({ ...m, snapshot: { meta: snapshot.meta, data: new Uint8Array(0) } }),
        totalSize: source.byteLength,
        sha256,
      },
    };
    const backoff = this.options.backoff;
    for (let attempt = 1; !this.abort.signal.aborted; attempt++) {
      const result = await this.attempt(header, source, record);
      if (result.kind === 'done') {
        backoff.reset();
        return { ...record, ok: true };
      }
      if (result.kind === 'rejected') return { ...record, error: result.error };
      if (this.abort.signal.aborted) break;
      this.options.onUnreachable(`snapshot stream: ${result.error}`);
      if (attempt >= this.options.maxAttempts) return { ...record, error: result.error };
      await cancellableDelay(backoff.next(), this.abort.signal);
    }
    return record;
  }

  private async attempt(header: SnapshotChunk, source: ImageSource, record: SnapshotTransferRecord): Promise<AttemptResult> {
    if (!(await awaitChannelReady(this.client, this.options.connectTimeoutMs))) {
      return { kind: 'broken', error: 'connection failed' };
    }
    if (this.abort.signal.aborted) return { kind: 'broken', error: 'stopped' };
    const call = new SnapshotCall(this.client.sendSnapshot(), this.options.stallTimeoutMs, this.abort.signal);
    try {
      call.write(header);
      const resumeFrom = await call.nextAck();
      if (resumeFrom.error) return { kind: 'rejected', error: resumeFrom.error };
      let offset = resumeFrom.offset ?? 0;
      const total = source.byteLength;
      if (offset > total) return { kind: 'rejected', error: `receiver claims offset ${offset} of ${total}` };
      record.startOffsets.push(offset);
      while (offset < total) {
        const end = Math.min(offset + this.options.chunkBytes, total);
        let chunk: Uint8Array;
        try {
          chunk = await source.read(offset, end - offset);
        } catch (err) {
          return { kind: 'rejected', error: `snapshot image unreadable: ${(err as Error).message}` };
        }
        if (!call.write({ offset, data: chunk })) await call.drained();
        offset = end;
      }
      for (;;) {
        const ack = await call.nextAck();
        if (ack.error) return { kind: 'rejected', error: ack.error };
        if (ack.done) return { kind: 'done' };
      }
    } catch (err) {
      return { kind: 'broken', error: (err as Error).message };
    } finally {
      call.close();
    }
  }
}

const HASH_SLICE_BYTES = 4 * 1024 * 1024;

/**
 * The image being sent, read a chunk at a time. A stored image (LevelStorage's file) is
 * opened once per transfer, so a newer snapshot deleting the file meanwhile does not break
 * it, and is never read whole: the leader holds a chunk, not tens of megabytes, per send.
 */
interface ImageSource {
  readonly byteLength: number;
  sha256(): Promise<Uint8Array>;
  read(offset: number, length: number): Promise<Uint8Array>;
  close(): Promise<void>;
}

async function openSource(image: SnapshotImage): Promise<ImageSource> {
  if (!isStoredImage(image)) {
    return {
      byteLength: image.byteLength,
      sha256: () => sha256InSlices(image.byteLength, async (offset, length) => image.subarray(offset, offset + length)),
      read: async (offset, length) => image.subarray(offset, offset + length),
      close: async () => undefined,
    };
  }
  const reader: StoredImageReader = await image.open();
  return {
    byteLength: image.byteLength,
    // Kept with the file when the storage wrote it; images from before that are hashed from the file.
    sha256: async () => image.sha256 ?? sha256InSlices(image.byteLength, (offset, length) => reader.read(offset, length)),
    read: (offset, length) => reader.read(offset, length),
    close: () => reader.close(),
  };
}

/** SHA-256 of a possibly huge image, yielding to the event loop between slices (ticks and heartbeats go on). */
async function sha256InSlices(byteLength: number, read: (offset: number, length: number) => Promise<Uint8Array>): Promise<Buffer> {
  const hash = createHash('sha256');
  for (let offset = 0; offset < byteLength; offset += HASH_SLICE_BYTES) {
    hash.update(await read(offset, Math.min(HASH_SLICE_BYTES, byteLength - offset)));
    if (offset + HASH_SLICE_BYTES < byteLength) await new Promise((r) => setImmediate(r));
  }
  return hash.digest();
}

/** The bidi call as awaitable steps: write with backpressure, read acks, fail on break or stall. */
class SnapshotCall {
  private readonly acks: SnapshotAck[] = [];
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private stallTimer: NodeJS.Timeout;
  private readonly onAbort = () => this.fail(new Error('stopped'));

  constructor(
    private readonly call: grpc.ClientDuplexStream<SnapshotChunk, SnapshotAck>,
    private readonly stallTimeoutMs: number,
    private readonly signal: AbortSignal,
  ) {
    call.on('data', (ack: SnapshotAck) => {
      this.acks.push(ack);
      this.stallTimer.refresh();
      this.notify();
    });
    call.on('error', (err: Error) => this.fail(err));
    call.on('end', () => this.fail(new Error('receiver ended the stream')));
    call.on('drain', () => this.notify());
    this.stallTimer = setTimeout(() => this.fail(new Error(`no acknowledgement for ${stallTimeoutMs} ms`)), stallTimeoutMs);
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  write(chunk: SnapshotChunk): boolean {
    if (this.failure) throw this.failure;
    return this.call.write(chunk);
  }

  async drained(): Promise<void> {
    // 'drain' and failures both notify; either way the caller continues or throws.
    await this.waitForSignal();
    if (this.failure) throw this.failure;
  }

  async nextAck(): Promise<SnapshotAck> {
    while (this.acks.length === 0) {
      if (this.failure) throw this.failure;
      await this.waitForSignal();
    }
    return this.acks.shift() as SnapshotAck;
  }

  close(): void {
    clearTimeout(this.stallTimer);
    this.signal.removeEventListener('abort', this.onAbort);
    this.call.removeAllListeners('data');
    this.call.on('error', () => {}); // a cancelled call still emits 'error'
    this.call.cancel();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private waitForSignal(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }
}

// The per-peer writer of Raft messages: a bounded queue drained into ONE long-lived
// SendMessages client stream, one batch per write.
//
// enqueue() only appends and schedules work, so the driver loop never waits on the
// network. The writer flushes everything queued as one batch when the stream is
// writable; while the stream pushes back (write() returned false, waiting for 'drain'),
// new messages keep coalescing in the queue. A broken stream or a failed connection is
// reported unreachable and retried with backoff, as long as there is something to send.

import type * as grpc from '@grpc/grpc-js';
import type { Message, NodeId } from '../core/types';
import { Backoff } from './backoff';
import { awaitChannelReady } from './channel-ready';
import type { RaftClient } from './raft-proto';

export interface PeerMessageStreamOptions {
  /** Queue bound in messages; beyond it the oldest are dropped. */
  maxQueuedMessages: number;
  /** Queue bound in bytes of entries (approximate); beyond it the oldest are dropped. */
  maxQueuedBytes: number;
  /** One write carries at most about this many bytes (below gRPC's max message length). */
  maxBatchBytes: number;
  connectTimeoutMs: number;
  backoff: Backoff;
  onUnreachable: (reason: string) => void;
  counters: MessageStreamCounters;
}

/** Totals over all peers, owned by the transport (see TransportStats). */
export interface MessageStreamCounters {
  batchesSent: number;
  messagesSent: number;
  messagesDropped: number;
  streamsOpened: number;
}

type State = 'idle' | 'connecting' | 'open' | 'backoff' | 'closed';

const MESSAGE_OVERHEAD_BYTES = 64;

function approximateBytes(m: Message): number {
  let bytes = MESSAGE_OVERHEAD_BYTES;
  if (m.entries) for (const e of m.entries) bytes += e.data.byteLength + 24;
  if (m.context) bytes += m.context.byteLength;
  return bytes;
}

export class PeerMessageStream {
  private readonly queue: Message[] = [];
  private queuedBytes = 0;
  private state: State = 'idle';
  private call: grpc.ClientWritableStream<Message[]> | undefined;
  private waitingForDrain = false;
  private flushScheduled = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly peer: NodeId,
    private readonly client: RaftClient,
    private readonly options: PeerMessageStreamOptions,
  ) {}

  get queuedMessages(): number {
    return this.queue.length;
  }

  get connectionState(): State {
    return this.state;
  }

  enqueue(msgs: readonly Message[]): void {
    if (this.state === 'closed') return;
    for (const m of msgs) {
      this.queue.push(m);
      this.queuedBytes += approximateBytes(m);
    }
    this.enforceBound();
    if (this.state === 'idle') void this.connect();
    else if (this.state === 'open') this.scheduleFlush();
    // 'connecting' and 'backoff' flush once the stream opens.
  }

  close(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.retryTimer);
    this.queue.length = 0;
    this.queuedBytes = 0;
    const call = this.call;
    this.call = undefined;
    call?.cancel();
  }

  /** Drops the oldest messages beyond the bounds: a slow or dead peer must not grow memory. */
  private enforceBound(): void {
    const { maxQueuedMessages, maxQueuedBytes } = this.options;
    let drop = 0;
    let droppedBytes = 0;
    while (
      this.queue.length - drop > 1 &&
      (this.queue.length - drop > maxQueuedMessages || this.queuedBytes - droppedBytes > maxQueuedBytes)
    ) {
      droppedBytes += approximateBytes(this.queue[drop]);
      drop++;
    }
    if (drop === 0) return;
    this.queue.splice(0, drop);
    this.queuedBytes -= droppedBytes;
    this.options.counters.messagesDropped += drop;
    this.options.onUnreachable(`queue full: dropped ${drop} oldest messages`);
  }

  private async connect(): Promise<void> {
    this.state = 'connecting';
    const ready = await awaitChannelReady(this.client, this.options.connectTimeoutMs);
    if (this.state !== 'connecting') return; // closed meanwhile
    if (!ready) return this.failed('connection failed');
    this.options.backoff.reset();
    this.openStream();
  }

  private openStream(): void {
    const call = this.client.sendMessages({}, (err) => this.streamEnded(call, err));
    call.on('drain', () => {
      if (this.call !== call) return;
      this.waitingForDrain = false;
      this.scheduleFlush();
    });
    this.call = call;
    this.waitingForDrain = false;
    this.state = 'open';
    this.options.counters.streamsOpened++;
    this.scheduleFlush();
  }

  /**
   * Flushes once the current synchronous run ends (a microtask) rather than now: every
   * send() made in this run joins the same batch. Not a later event-loop turn: Node's
   * HTTP/2 already defers the socket write to the next turn's check phase, and every
   * further turn is a chance for the fsync thread the driver is about to wake to take
   * the CPU first (measured: a leader's App left ~100 us later that way).
   */
  private scheduleFlush(): void {
    if (this.flushScheduled || this.queue.length === 0) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const call = this.call;
    if (this.state !== 'open' || call === undefined) return;
    while (this.queue.length > 0 && !this.waitingForDrain) {
      const batch = this.takeBatch();
      this.options.counters.batchesSent++;
      this.options.counters.messagesSent += batch.length;
      // false: gRPC buffered it but wants us to wait for 'drain'; meanwhile we coalesce.
      if (!call.write(batch)) this.waitingForDrain = true;
    }
  }

  private takeBatch(): Message[] {
    let bytes = 0;
    let count = 0;
    while (count < this.queue.length) {
      const size = approximateBytes(this.queue[count]);
      if (count > 0 && bytes + size > this.options.maxBatchBytes) break;
      bytes += size;
      count++;
    }
    this.queuedBytes -= bytes;
    return this.queue.splice(0, count);
  }

  private streamEnded(call: grpc.ClientWritableStream<Message[]>, err: grpc.ServiceError | null): void {
    if (this.call !== call) return; // an old stream, already replaced or closed
    this.call = undefined;
    this.failed(err ? `stream broke: ${err.details || err.message}` : 'stream closed by peer');
  }

  /** Messages written to the broken stream are lost; what is still queued goes on the next one. */
  private failed(reason: string): void {
    this.state = 'backoff';
    this.options.onUnreachable(reason);
    this.retryTimer = setTimeout(() => {
      if (this.state !== 'backoff') return;
      if (this.queue.length === 0) this.state = 'idle'; // reconnect when there is something to send
      else void this.connect();
    }, this.options.backoff.next());
  }
}

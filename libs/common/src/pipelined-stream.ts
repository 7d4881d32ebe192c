// Many requests in flight on one long-lived duplex stream (a gRPC bidi call), matched to
// their replies by id; requests made in the same event-loop turn leave as one batch
// message. A follower forwarding submissions to the leader and raft-kv's clients both
// talk this way: one message per request cost more than the work it carried.
//
// A request resolves with its reply or rejects with a PipelineError: no reply in time,
// the stream broke, or the stream was closed. After a rejection the request's outcome is
// unknown (the other side may have acted on it). A broken stream is opened again by the
// next request.

/** What the stream must offer (a grpc-js ClientDuplexStream does). */
export interface BatchDuplex<Batch, ReplyBatch> {
  write(batch: Batch): unknown;
  end(): void;
  on(event: 'data', listener: (batch: ReplyBatch) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

export interface PipelineOptions<Req, Reply, Batch, ReplyBatch> {
  /** Opens the stream (called again after it broke). */
  open(): BatchDuplex<Batch, ReplyBatch>;
  /** Wraps the requests of one turn into a stream message. */
  batch(requests: Req[]): Batch;
  /** The replies a stream message carries. */
  replies(batch: ReplyBatch): readonly Reply[];
  /** The other side, for error messages (e.g. its address). */
  peer: string;
}

export class PipelineError extends Error {
  override readonly name = 'PipelineError';
  constructor(
    readonly kind: 'timeout' | 'broken' | 'closed',
    message: string,
  ) {
    super(message);
  }
}

interface Pending<Reply> {
  resolve: (reply: Reply) => void;
  reject: (err: PipelineError) => void;
  timer: NodeJS.Timeout;
}

export class PipelinedStream<Req extends { id: number }, Reply extends { id: number }, Batch, ReplyBatch> {
  private stream: BatchDuplex<Batch, ReplyBatch> | undefined;
  private readonly pending = new Map<number, Pending<Reply>>();
  private outbox: Req[] = [];
  private flushScheduled = false;
  private nextId = 1;
  private closed = false;

  constructor(private readonly opts: PipelineOptions<Req, Reply, Batch, ReplyBatch>) {}

  /** Requests sent and not answered yet. */
  get inFlight(): number {
    return this.pending.size;
  }

  request(fields: Omit<Req, 'id'>, timeoutMs: number): Promise<Reply> {
    if (this.closed) return Promise.reject(new PipelineError('closed', 'stream closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new PipelineError('timeout', `no reply from ${this.opts.peer} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.outbox.push({ ...fields, id } as Req);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => this.flush());
      }
    });
  }

  /** Fails every pending request ('closed') and ends the stream. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.failAll('closed', 'stream closed');
    this.stream?.end();
    this.stream = undefined;
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0 || this.closed) return;
    const requests = this.outbox;
    this.outbox = [];
    this.openStream().write(this.opts.batch(requests));
  }

  private openStream(): BatchDuplex<Batch, ReplyBatch> {
    if (this.stream) return this.stream;
    const stream = this.opts.open();
    stream.on('data', (batch) => {
      for (const reply of this.opts.replies(batch)) {
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
      this.failAll('broken', `stream to ${this.opts.peer} broke: ${why}`);
    };
    stream.on('error', (err) => broken(err.message));
    stream.on('end', () => broken('the other side ended it'));
    this.stream = stream;
    return stream;
  }

  private failAll(kind: PipelineError['kind'], message: string): void {
    this.outbox = [];
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new PipelineError(kind, message));
    }
    this.pending.clear();
  }
}

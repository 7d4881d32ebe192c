import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { PipelinedStream, PipelineError, type BatchDuplex } from '../src/index';

interface Req {
  id: number;
  text: string;
}
interface Reply {
  id: number;
  echo: string;
}

/** A stream whose other side the test plays: it sees every batch written and answers by hand. */
class FakeDuplex extends EventEmitter implements BatchDuplex<Req[], Reply[]> {
  readonly written: Req[][] = [];
  ended = false;
  write(batch: Req[]): boolean {
    this.written.push(batch);
    return true;
  }
  end(): void {
    this.ended = true;
  }
  answer(...replies: Reply[]): void {
    this.emit('data', replies);
  }
}

function pipeline() {
  const streams: FakeDuplex[] = [];
  const pipe = new PipelinedStream<Req, Reply, Req[], Reply[]>({
    open: () => {
      const s = new FakeDuplex();
      streams.push(s);
      return s;
    },
    batch: (requests) => requests,
    replies: (batch) => batch,
    peer: 'the leader',
  });
  return { pipe, streams };
}

const rejection = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err as PipelineError);

describe('PipelinedStream', () => {
  it('sends the requests of one turn as one batch and matches replies by id, in any order', async () => {
    const { pipe, streams } = pipeline();
    const a = pipe.request({ text: 'a' }, 1000);
    const b = pipe.request({ text: 'b' }, 1000);
    await Promise.resolve();
    expect(streams).toHaveLength(1);
    expect(streams[0].written).toEqual([[{ id: 1, text: 'a' }, { id: 2, text: 'b' }]]);
    expect(pipe.inFlight).toBe(2);
    streams[0].answer({ id: 2, echo: 'B' }, { id: 1, echo: 'A' });
    expect(await a).toEqual({ id: 1, echo: 'A' });
    expect(await b).toEqual({ id: 2, echo: 'B' });
    expect(pipe.inFlight).toBe(0);
  });

  it('rejects a request with no reply in time, and ignores its late reply', async () => {
    const { pipe, streams } = pipeline();
    const err = await rejection(pipe.request({ text: 'slow' }, 20));
    expect(err).toMatchObject({ kind: 'timeout', message: expect.stringContaining('the leader') });
    streams[0].answer({ id: 1, echo: 'late' });
    expect(pipe.inFlight).toBe(0);
  });

  it('fails what is in flight when the stream breaks, and opens a new stream for the next request', async () => {
    const { pipe, streams } = pipeline();
    const lost = rejection(pipe.request({ text: 'x' }, 1000));
    await Promise.resolve();
    streams[0].emit('error', new Error('connection reset'));
    expect(await lost).toMatchObject({ kind: 'broken', message: expect.stringContaining('connection reset') });
    const next = pipe.request({ text: 'y' }, 1000);
    await Promise.resolve();
    expect(streams).toHaveLength(2);
    streams[1].answer({ id: 2, echo: 'Y' });
    expect(await next).toEqual({ id: 2, echo: 'Y' });
  });

  it('fails pending and later requests once closed, and ends the stream', async () => {
    const { pipe, streams } = pipeline();
    const pending = rejection(pipe.request({ text: 'x' }, 1000));
    await Promise.resolve();
    pipe.close();
    expect(await pending).toMatchObject({ kind: 'closed' });
    expect(streams[0].ended).toBe(true);
    expect(await rejection(pipe.request({ text: 'z' }, 1000))).toMatchObject({ kind: 'closed' });
  });
});

import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { closeOnAbort } from '../../src/jobs/moves/close-on-abort';

describe('a move\'s catch-up closes with the leadership term, and lets go of it once closed', () => {
  it('leaves no listener on the term\'s signal once closed, however many moves the term runs', async () => {
    const term = new AbortController();
    for (let move = 0; move < 20; move++) {
      const close = closeOnAbort(term.signal, async () => {});
      await close();
    }
    expect(getEventListeners(term.signal, 'abort')).toHaveLength(0);
  });

  it('closes once when the term ends, and not again when closed afterwards', async () => {
    const term = new AbortController();
    let closed = 0;
    const close = closeOnAbort(term.signal, async () => void closed++);
    term.abort();
    await close();
    expect(closed).toBe(1);
  });

  it('closes at once when the term has already ended', async () => {
    const term = new AbortController();
    term.abort();
    let closed = 0;
    closeOnAbort(term.signal, async () => void closed++);
    await Promise.resolve();
    expect(closed).toBe(1);
  });

  it('closed early, does not close again when the term ends', async () => {
    const term = new AbortController();
    let closed = 0;
    const close = closeOnAbort(term.signal, async () => void closed++);
    await close();
    term.abort();
    expect(closed).toBe(1);
  });
});

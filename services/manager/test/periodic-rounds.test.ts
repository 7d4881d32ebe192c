// PeriodicRounds: never two rounds at once; with catchUp, a tick that found a round under
// way is not lost (the catalog sync relies on it for its propagation time).

import { afterEach, describe, expect, it, vi } from 'vitest';
import { PeriodicRounds } from '../src/leader/periodic-rounds';

describe('PeriodicRounds', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** When rounds that each take 250 ms start, ticked every 100 ms for 1 s. */
  const roundStarts = async (catchUp: boolean) => {
    vi.useFakeTimers({ now: 0 });
    const starts: number[] = [];
    let running = 0;
    let overlapped = false;
    const loop = new PeriodicRounds(
      async () => {
        starts.push(Date.now());
        running++;
        if (running > 1) overlapped = true;
        await new Promise((r) => setTimeout(r, 250));
        running--;
      },
      100,
      { catchUp },
    );
    loop.start({ runAtOnce: false });
    await vi.advanceTimersByTimeAsync(1_000);
    const stopped = loop.stop();
    await vi.advanceTimersByTimeAsync(300);
    await stopped;
    expect(overlapped).toBe(false);
    return starts;
  };

  it('drops a tick that finds a round under way: the next round waits for the next tick', async () => {
    expect(await roundStarts(false)).toEqual([100, 400, 700, 1000]);
  });

  it('with catchUp, starts the next round as soon as a slow one ends', async () => {
    expect(await roundStarts(true)).toEqual([100, 350, 600, 850]);
  });
});

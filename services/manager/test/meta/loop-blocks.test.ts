// The tracer that takes the longest event-loop block of a snapshot apart: what ran inside
// the image's own pieces is told from what ran outside them (a probe round, a query...).

import { describe, expect, it } from 'vitest';
import { LoopBlockTracer } from '../../src/meta/snapshot/loop-blocks';

const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};
const turn = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('LoopBlockTracer', () => {
  it('attributes a long block to the image\'s piece when the piece held the loop', async () => {
    const tracer = new LoopBlockTracer();
    await turn();
    tracer.piece(() => busy(60));
    await turn();
    const { block, longestPieceSeconds } = tracer.end();
    expect(block.seconds).toBeGreaterThanOrEqual(0.06);
    expect(block.pieceSeconds).toBeGreaterThanOrEqual(0.06);
    expect(longestPieceSeconds).toBeGreaterThanOrEqual(0.06);
    expect(block.cpuSeconds).toBeGreaterThan(0.02); // it ran (less than 60 ms when the host is busy)
  });

  it('tells a block the process spent off the CPU from one it spent running', async () => {
    const tracer = new LoopBlockTracer();
    await turn();
    // The thread holds the loop without running, as when the OS runs other processes instead.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 80);
    await turn();
    const { block } = tracer.end();
    expect(block.seconds).toBeGreaterThanOrEqual(0.08);
    expect(block.pieceSeconds).toBe(0);
    expect(block.cpuSeconds).toBeLessThan(0.03);
  });

  it('attributes nothing to the pieces when other work held the loop', async () => {
    const tracer = new LoopBlockTracer();
    await turn();
    tracer.piece(() => busy(2));
    await turn();
    busy(60);
    await turn();
    const { block } = tracer.end();
    expect(block.seconds).toBeGreaterThanOrEqual(0.06);
    expect(block.pieceSeconds).toBeLessThan(0.01);
  });
});

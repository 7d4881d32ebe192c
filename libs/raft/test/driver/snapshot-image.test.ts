// Joining a snapshot image's pieces into the one buffer Storage takes: on a 1,000-host
// manager the image is 44 MB of fresh memory, and copying it in one turn held the leader's
// event loop for 200-300 ms after its last piece.

import { describe, expect, it } from 'vitest';
import { JOIN_BYTES_PER_TURN, readSnapshotImage } from '../../src/snapshot-image';
import type { StateMachine } from '../../src/state-machine';

const PIECE = 256 * 1024;

/** A state machine whose image is `count` pieces of PIECE bytes (piece i filled with i % 251); notes when the last was taken. */
function piecesMachine(count: number, onLastTaken: () => void): StateMachine {
  function* chunks(): Generator<Uint8Array> {
    for (let i = 0; i < count; i++) yield new Uint8Array(PIECE).fill(i % 251);
    onLastTaken();
  }
  return {
    apply: () => [],
    snapshot: () => new Uint8Array(0),
    snapshotChunks: () => ({ chunks: chunks(), copyOnWrite: true }),
    restore: () => undefined,
    appliedIndex: () => 0,
  };
}

describe('reading a snapshot image', () => {
  it('joins a large image a bounded number of bytes per event-loop turn after the last piece, not in one turn', async () => {
    const count = 64; // 16 MiB
    let lastTaken = false;
    let turnsAfterLast = 0;
    let ticking = true;
    const tick = () => {
      if (lastTaken) turnsAfterLast++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const image = await readSnapshotImage(piecesMachine(count, () => (lastTaken = true)), () => false).image;
    ticking = false;

    expect(image.byteLength).toBe(count * PIECE);
    for (let i = 0; i < count; i++) {
      expect(image[i * PIECE]).toBe(i % 251);
      expect(image[(i + 1) * PIECE - 1]).toBe(i % 251);
    }
    // Other work ran between the copies: at least one turn per JOIN_BYTES_PER_TURN but the last.
    expect(turnsAfterLast).toBeGreaterThanOrEqual(Math.ceil((count * PIECE) / JOIN_BYTES_PER_TURN) - 1);
  });

  it('stops joining when the node stops', async () => {
    let lastTaken = false;
    const reading = readSnapshotImage(piecesMachine(64, () => (lastTaken = true)), () => lastTaken);
    await expect(reading.image).rejects.toThrow(/stopped/i);
  });
});

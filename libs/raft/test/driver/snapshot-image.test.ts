// Reading a snapshot image's pieces for Storage: one piece per event-loop turn, handed on as
// they come and never joined (on a 1,000-host manager the image is 44 MB, and its joined copy
// on top of the pieces set off the leader's major GCs during the snapshot).

import { describe, expect, it } from 'vitest';
import { readSnapshotImage } from '../../src/snapshot-image';
import type { StateMachine } from '../../src/state-machine';

const PIECE = 256 * 1024;

/** A state machine whose image is `count` pieces of PIECE bytes (piece i filled with i % 251); notes each piece it produced and whether its reader was closed. */
function piecesMachine(count: number) {
  const produced: Uint8Array[] = [];
  let closed = false;
  function* chunks(): Generator<Uint8Array> {
    try {
      for (let i = 0; i < count; i++) {
        const piece = new Uint8Array(PIECE).fill(i % 251);
        produced.push(piece);
        yield piece;
      }
    } finally {
      closed = true;
    }
  }
  const sm: StateMachine = {
    apply: () => [],
    snapshot: () => new Uint8Array(0),
    snapshotChunks: () => ({ chunks: chunks(), copyOnWrite: false }),
    restore: () => undefined,
    appliedIndex: () => 0,
  };
  return { sm, produced, closed: () => closed };
}

describe('reading a snapshot image', () => {
  it('hands each piece on as it is produced, one per event-loop turn, and never joins them', async () => {
    const count = 16;
    const machine = piecesMachine(count);
    const reading = readSnapshotImage(machine.sm, () => false);
    let turns = 0;
    let ticking = true;
    const tick = () => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const got: Uint8Array[] = [];
    for await (const piece of reading.pieces) {
      // The taker has piece i before piece i + 1 exists: nothing waits for the last one.
      expect(machine.produced).toHaveLength(got.length + 1);
      got.push(piece);
    }
    ticking = false;
    await reading.taken;
    expect(got).toHaveLength(count);
    // The very objects the state machine made, not copies into one image.
    got.forEach((piece, i) => expect(piece).toBe(machine.produced[i]));
    expect(turns).toBeGreaterThanOrEqual(count - 1);
  });

  it('stops when the node stops, and closes the state machine reader', async () => {
    let stop = false;
    const machine = piecesMachine(64);
    const reading = readSnapshotImage(machine.sm, () => stop);
    const take = (async () => {
      for await (const _piece of reading.pieces) stop = true;
    })();
    await expect(take).rejects.toThrow(/stopped/i);
    await reading.taken;
    expect(machine.closed()).toBe(true);
  });

  it('a taker that gives up before the first piece (storage refused the snapshot) ends the reading: apply is no longer held', async () => {
    const machine = piecesMachine(4);
    const reading = readSnapshotImage(machine.sm, () => false);
    let taken = false;
    void reading.taken.then(() => (taken = true));
    await new Promise((r) => setImmediate(r));
    expect(taken).toBe(false);
    reading.cancel();
    await reading.taken;
    expect(taken).toBe(true);
  });
});

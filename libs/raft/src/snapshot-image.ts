// Reads a state machine's snapshot image a piece per event-loop turn (StateMachine.snapshotChunks),
// so that serialising tens of megabytes never holds the loop: ticks, heartbeats and the log's
// writes run between the pieces. A state machine without snapshotChunks is read in one call.

import { StoppedError } from './core/errors';
import type { StateMachine } from './state-machine';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export interface ImageReading {
  /** Resolves with the whole image. */
  image: Promise<Uint8Array>;
  /** False when apply must wait until `image` settles (the pieces are read from the live state), or until `frozen`. */
  copyOnWrite: boolean;
  /** Resolves when the pieces still to come no longer read the live state (StateMachine.snapshotChunks). */
  frozen?: Promise<void>;
  /** To be called once the image is stored or given up (StateMachine.snapshotChunks). */
  done?: () => void;
}

export function readSnapshotImage(sm: StateMachine, stopped: () => boolean): ImageReading {
  if (!sm.snapshotChunks) return { image: Promise.resolve(sm.snapshot()), copyOnWrite: true };
  const { chunks, copyOnWrite, frozen, done } = sm.snapshotChunks();
  return { image: collect(chunks, stopped), copyOnWrite, frozen, done };
}

async function collect(chunks: Iterator<Uint8Array>, stopped: () => boolean): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const piece = chunks.next();
    if (piece.done) break;
    pieces.push(piece.value);
    bytes += piece.value.byteLength;
    await nextTurn();
    if (stopped()) throw new StoppedError();
  }
  return joinInTurns(pieces, bytes, stopped);
}

/**
 * Bytes copied into the joined image per event-loop turn. The image is fresh memory: the
 * copy's cost is mostly the kernel's first touch of each page, not the memcpy. On the shared
 * bench machine one 44 MB image took 200-300 ms in one turn (the 1,000-host leader's longest
 * block during a snapshot); 1 MiB a turn is a few milliseconds.
 */
export const JOIN_BYTES_PER_TURN = 1 << 20;

/** Copies `pieces` into one buffer (Storage and the snapshot stream take one image), at most about JOIN_BYTES_PER_TURN a turn. */
async function joinInTurns(pieces: Uint8Array[], bytes: number, stopped: () => boolean): Promise<Uint8Array> {
  // Not touched yet: the allocation itself costs nothing in proportion to the size.
  const image = new Uint8Array(bytes);
  let at = 0;
  let sinceTurn = 0;
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i];
    for (let from = 0; from < piece.byteLength; ) {
      if (sinceTurn >= JOIN_BYTES_PER_TURN) {
        await nextTurn();
        if (stopped()) throw new StoppedError();
        sinceTurn = 0;
      }
      const n = Math.min(piece.byteLength - from, JOIN_BYTES_PER_TURN - sinceTurn);
      image.set(from === 0 && n === piece.byteLength ? piece : piece.subarray(from, from + n), at);
      at += n;
      from += n;
      sinceTurn += n;
    }
  }
  return image;
}

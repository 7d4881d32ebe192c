// Rate limiting of the backup stream, like `pv -L` (the stream's processes come from ops/exec.ts).

import type { Readable, Writable } from 'node:stream';

/**
 * Yields the source's bytes at no more than `bytesPerSecond` (0 = unlimited), in pieces of
 * at most `pieceBytes`, like `pv -L`: it sleeps whenever it is ahead of the allowed rate.
 * Pausing the reader pauses the producer through stream backpressure.
 */
export async function* rateLimited(source: AsyncIterable<Buffer>, bytesPerSecond: number, pieceBytes = 64 * 1024): AsyncGenerator<Buffer> {
  const started = performance.now();
  let sent = 0;
  for await (const chunk of source) {
    for (let at = 0; at < chunk.length; at += pieceBytes) {
      const piece = chunk.subarray(at, Math.min(chunk.length, at + pieceBytes));
      if (bytesPerSecond > 0) {
        const dueMs = ((sent + piece.length) / bytesPerSecond) * 1000;
        const aheadMs = dueMs - (performance.now() - started);
        if (aheadMs > 1) await new Promise((r) => setTimeout(r, aheadMs));
      }
      sent += piece.length;
      yield piece;
    }
  }
}

/**
 * Joins pieces into pieces of at least `minBytes` (the last may be smaller). A backup
 * stream sent as one gRPC message per 64 KiB pipe read spends its time on per-message work
 * on both agents; at 1 MiB the copy is paced by the disks and the network instead.
 */
export async function* coalesced(source: AsyncIterable<Buffer>, minBytes: number): AsyncGenerator<Buffer> {
  for await (const group of gathered(source, minBytes)) yield group.length === 1 ? group[0] : Buffer.concat(group);
}

/** A backup stream's pipe reads are sent gathered into frames of at least this many bytes (gathered()). */
export const GATHER_BYTES = 1024 * 1024;

/**
 * Gathers pieces into groups of at least `minBytes` (the last may be smaller), without
 * joining them: a sender writes a group as one data frame with one corked write (plane
 * server's send). Gathering the 64 KiB pipe reads of a backup into 1 MiB frames cuts the
 * sending agent's CPU by about a fifth (fewer TLS writes, drain waits and promise turns per
 * byte; bench/backup/README.md).
 */
export async function* gathered(source: AsyncIterable<Buffer>, minBytes: number): AsyncGenerator<Buffer[]> {
  let held: Buffer[] = [];
  let size = 0;
  for await (const piece of source) {
    held.push(piece);
    size += piece.length;
    if (size >= minBytes) {
      yield held;
      held = [];
      size = 0;
    }
  }
  if (size > 0) yield held;
}

/**
 * Copies `from` into `into` at no more than `bytesPerSecond` (> 0), like `pv -L` between two
 * processes, and ends `into` after the last byte. It works on the pipe's own reads ('data'
 * events, at most 64 KiB each): no async iteration, no copy and no splitting per piece, since
 * every uncompressed byte of a backup passes here. Reading pauses while `into` is full or
 * while the copy is ahead of the allowed rate; pausing the reader pauses the producer
 * through the pipe. Resolves once `from` ended, or once `into` closed early (its process
 * died: the caller learns why from that process).
 */
export function relayAtMost(from: Readable, into: Writable, bytesPerSecond: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let sent = 0;
    // Reasons the reader is paused (a full `into`, a wait for the rate): it resumes at none.
    let holds = 0;
    const release = () => {
      holds -= 1;
      if (holds === 0) from.resume();
    };
    const hold = () => {
      if (holds === 0) from.pause();
      holds += 1;
    };
    const finish = (err?: Error) => {
      from.off('data', onData);
      into.off('close', onIntoClosed);
      if (err) reject(err);
      else resolve();
    };
    const onIntoClosed = () => {
      from.destroy();
      finish();
    };
    const onData = (piece: Buffer) => {
      sent += piece.length;
      if (!into.write(piece)) {
        hold();
        into.once('drain', release);
      }
      const aheadMs = (sent / bytesPerSecond) * 1000 - (performance.now() - started);
      if (aheadMs > 1) {
        hold();
        setTimeout(release, aheadMs);
      }
    };
    from.on('data', onData);
    from.once('end', () => {
      into.end();
      finish();
    });
    from.once('error', (err) => finish(err));
    into.once('close', onIntoClosed);
  });
}

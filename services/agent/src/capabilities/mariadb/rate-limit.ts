// Rate limiting of the backup stream, like `pv -L` (the stream's processes come from ops/exec.ts).

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
  let held: Buffer[] = [];
  let size = 0;
  for await (const piece of source) {
    held.push(piece);
    size += piece.length;
    if (size >= minBytes) {
      yield held.length === 1 ? held[0] : Buffer.concat(held, size);
      held = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(held, size);
}

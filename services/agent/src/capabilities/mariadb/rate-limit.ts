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

// A resource a move keeps open past one step (its catch-up) must close when the leadership
// term ends (the next leader runs its own, and this one must not write on), or earlier when
// the move is done with it. The term's signal lives as long as the term and sees every move
// of it: a listener left on it after the close would keep the closed resource reachable
// until the term ends (and Node warns past 10 listeners).

/**
 * Runs `close` when `signal` aborts (at once if it already has); the returned function runs
 * it earlier. Either way it runs once, and the listener is removed when it does.
 */
export function closeOnAbort(signal: AbortSignal, close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | null = null;
  const run = (): Promise<void> => {
    if (!closing) {
      signal.removeEventListener('abort', onAbort);
      closing = close();
    }
    return closing;
  };
  const onAbort = () => void run().catch(() => {});
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return run;
}

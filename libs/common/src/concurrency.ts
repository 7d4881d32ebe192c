// Running many calls without starting them all at once: at most N in flight, or N started per
// event-loop turn. Used where a round reaches every host or instance (the manager's health
// rounds, the agent's per-host probe).

/** Runs `run` over `items` with at most `limit` in flight at once. */
export async function eachAtMost<T>(limit: number, items: readonly T[], run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Calls a leader's round (health probes, shard failure detection) starts per event-loop turn (startInSlices). */
export const CALLS_STARTED_PER_TURN = 50;

/**
 * Starts `run` for every item, `perTurn` of them in each event-loop turn, and resolves when all
 * have ended (rejects with the first failure, as Promise.all). Starting a gRPC call costs the
 * event loop a fraction of a millisecond; 1,000 started in one turn held a leader's loop for
 * ~170 ms each health round (bench:scale, 1,000 hosts), delaying whatever else it was doing
 * then: Raft heartbeats, writes' acknowledgements, a snapshot's pieces.
 */
export async function startInSlices<T>(perTurn: number, items: readonly T[], run: (item: T) => Promise<void>): Promise<void> {
  const runs: Promise<void>[] = [];
  for (let i = 0; i < items.length; i += perTurn) {
    if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    for (const item of items.slice(i, i + perTurn)) {
      const started = run(item);
      started.catch(() => {}); // seen by Promise.all below; not an unhandled rejection while later slices start
      runs.push(started);
    }
  }
  await Promise.all(runs);
}

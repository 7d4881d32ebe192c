// Callers waiting for the next leader change, woken by one listener on the node. A
// listener per waiting call made every add and remove a scan of the emitter's listener
// list, and past 10 waiting calls node printed a MaxListenersExceededWarning, with a
// formatted stack, again each time the list shrank back and grew.

export const LEADER_CHANGED = Symbol('leader changed');

export class LeaderChanges {
  private readonly waiters = new Set<() => void>();

  /** Wakes every waiter; the owner calls it from its one 'leaderChange' listener. */
  notify(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  /** Resolves at the next leader change; stop() when no longer needed. */
  next(): { changed: Promise<typeof LEADER_CHANGED>; stop(): void } {
    let wake: () => void = () => {};
    const changed = new Promise<typeof LEADER_CHANGED>((resolve) => {
      wake = () => resolve(LEADER_CHANGED);
      this.waiters.add(wake);
    });
    return { changed, stop: () => this.waiters.delete(wake) };
  }

  /** True if `event` (default: the next leader change) happens before `deadline`. */
  async within(deadline: number, event?: Promise<unknown>): Promise<boolean> {
    const next = event ? undefined : this.next();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()))));
    try {
      return await Promise.race([(event ?? next!.changed).then(() => true as const), late]);
    } finally {
      clearTimeout(timer);
      next?.stop();
    }
  }
}

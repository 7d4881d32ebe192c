// The loop of a leader-only service (catalog sync, instance reconciler, rollback finisher):
// one round every interval, never two at once, and a stop that waits for the round under way.

export class PeriodicRounds {
  private timer: NodeJS.Timeout | null = null;
  private current: Promise<void> | null = null;
  /** A tick came while a round was under way (catchUp only). */
  private missedTick = false;

  /**
   * With `catchUp`, a tick that finds a round under way starts the next round as soon as
   * that one ends, instead of being dropped: a round that outlasts the interval is followed
   * at once, not up to one interval later (the catalog sync's propagation time).
   */
  constructor(
    private readonly round: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly options: { catchUp?: boolean } = {},
  ) {}

  get started(): boolean {
    return this.timer !== null;
  }

  /** Starts ticking, and runs a first round at once when asked; a no-op when already started. */
  start(opts: { runAtOnce: boolean }): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
    if (opts.runAtOnce) void this.run();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.current;
  }

  private tick(): void {
    if (this.current && this.options.catchUp) this.missedTick = true;
    void this.run();
  }

  /** One round; while one is under way, a tick (or a caller) joins it instead of starting another. */
  run(): Promise<void> {
    this.current ??= this.round().finally(() => {
      this.current = null;
      if (this.missedTick && this.timer) {
        this.missedTick = false;
        void this.run();
      }
    });
    return this.current;
  }
}

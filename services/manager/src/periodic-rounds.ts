// The loop of a leader-only service (catalog sync, instance reconciler, rollback finisher):
// one round every interval, never two at once, and a stop that waits for the round under way.

export class PeriodicRounds {
  private timer: NodeJS.Timeout | null = null;
  private current: Promise<void> | null = null;

  constructor(
    private readonly round: () => Promise<void>,
    private readonly intervalMs: number,
  ) {}

  get started(): boolean {
    return this.timer !== null;
  }

  /** Starts ticking, and runs a first round at once when asked; a no-op when already started. */
  start(opts: { runAtOnce: boolean }): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.run(), this.intervalMs);
    this.timer.unref();
    if (opts.runAtOnce) void this.run();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.current;
  }

  /** One round; while one is under way, a tick (or a caller) joins it instead of starting another. */
  run(): Promise<void> {
    this.current ??= this.round().finally(() => {
      this.current = null;
    });
    return this.current;
  }
}

// Where the event loop's longest block went while a snapshot image was produced or restored:
// a histogram (monitorEventLoopDelay) says how long the loop was held, not by what. At fleet
// scale the leader's longest block was 3-8x the longest piece of the image measured alone,
// so the block is taken apart here: the time this member spent inside the image's own
// pieces, in V8's garbage collector (perf_hooks 'gc' entries), and anything else (a probe
// round, a query, gRPC, LevelDB callbacks...) that ran in the same turn.

import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

export interface LoopBlock {
  /** The longest time between two turns of a 1 ms timer while the tracer ran. */
  seconds: number;
  /** Of it: inside the image's own pieces (work the tracer was told of with piece()). */
  pieceSeconds: number;
  /** Of it: V8 garbage collection pauses (any kind). */
  gcSeconds: number;
  /** Of it: major (mark-compact) collections only. */
  majorGcSeconds: number;
  /**
   * CPU this process used over the block (user + system, all its threads). Far below
   * `seconds`, the main thread was not running for the rest: the OS ran other processes
   * (a shared host), which no work of this member explains.
   */
  cpuSeconds: number;
}

export interface GcFigures {
  /** Collections seen while the tracer ran, and the longest pause of each kind. */
  count: number;
  majorCount: number;
  longestSeconds: number;
  longestMajorSeconds: number;
  totalSeconds: number;
}

interface Span {
  start: number;
  end: number;
  major?: boolean;
}

const overlap = (spans: readonly Span[], start: number, end: number, keep: (s: Span) => boolean = () => true): number =>
  spans.reduce((sum, s) => (keep(s) ? sum + Math.max(0, Math.min(end, s.end) - Math.max(start, s.start)) : sum), 0);

/** This process's user + system CPU so far, µs (getrusage: about a microsecond, fine for a 1 ms timer). */
const cpuMicros = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** How long a past span is kept for attribution: far longer than any block worth explaining. */
const KEEP_SPANS_MS = 30_000;

export class LoopBlockTracer {
  private readonly pieces: Span[] = [];
  private readonly gcs: Span[] = [];
  private readonly gc: GcFigures = { count: 0, majorCount: 0, longestSeconds: 0, longestMajorSeconds: 0, totalSeconds: 0 };
  private longest: LoopBlock = { seconds: 0, pieceSeconds: 0, gcSeconds: 0, majorGcSeconds: 0, cpuSeconds: 0 };
  private lastTurn = performance.now();
  private lastCpuMicros = cpuMicros();
  private timer: NodeJS.Timeout | undefined;
  private readonly observer: PerformanceObserver;

  constructor() {
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) this.noteGc(e);
    });
    this.observer.observe({ entryTypes: ['gc'] });
    this.timer = setInterval(() => this.turn(), 1);
    this.timer.unref();
  }

  /** Runs one piece of the image's work, timed. */
  piece<T>(work: () => T): T {
    const start = performance.now();
    try {
      return work();
    } finally {
      const end = performance.now();
      this.pieces.push({ start, end });
      this.longestPiece = Math.max(this.longestPiece, end - start);
      this.pieceTotal += end - start;
    }
  }

  /** Stops tracing; returns the longest block and its parts, and the collections seen. */
  end(): { block: LoopBlock; gc: GcFigures; longestPieceSeconds: number; pieceSeconds: number } {
    if (this.timer) {
      this.turn();
      clearInterval(this.timer);
      this.timer = undefined;
      // Entries of collections that ended before now but were not yet delivered.
      for (const e of this.observer.takeRecords()) this.noteGc(e);
      this.observer.disconnect();
      this.attribute(this.lastTurnBefore, this.lastTurn);
    }
    const longestPieceSeconds = this.longestPiece / 1000;
    return { block: this.longest, gc: this.gc, longestPieceSeconds, pieceSeconds: this.pieceTotal / 1000 };
  }

  private longestPiece = 0;
  private pieceTotal = 0;
  private lastTurnBefore = 0;

  private turn(): void {
    const now = performance.now();
    const cpu = cpuMicros();
    const gap = now - this.lastTurn;
    if (gap / 1000 > this.longest.seconds) {
      // GC entries of this very block arrive after it: attributed once more at end() and at the next long gap.
      this.longest = { seconds: gap / 1000, pieceSeconds: 0, gcSeconds: 0, majorGcSeconds: 0, cpuSeconds: (cpu - this.lastCpuMicros) / 1e6 };
      this.lastTurnBefore = this.lastTurn;
      this.attribute(this.lastTurn, now);
    }
    this.lastTurn = now;
    this.lastCpuMicros = cpu;
    this.prune(now);
  }

  private attribute(start: number, end: number): void {
    if (end <= start || Math.abs((end - start) / 1000 - this.longest.seconds) > 1e-9) return;
    this.longest.pieceSeconds = overlap(this.pieces, start, end) / 1000;
    this.longest.gcSeconds = overlap(this.gcs, start, end) / 1000;
    this.longest.majorGcSeconds = overlap(this.gcs, start, end, (s) => s.major === true) / 1000;
  }

  private noteGc(e: PerformanceEntry): void {
    const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    const major = kind === constants.NODE_PERFORMANCE_GC_MAJOR;
    this.gcs.push({ start: e.startTime, end: e.startTime + e.duration, major });
    const s = e.duration / 1000;
    this.gc.count++;
    this.gc.totalSeconds += s;
    this.gc.longestSeconds = Math.max(this.gc.longestSeconds, s);
    if (major) {
      this.gc.majorCount++;
      this.gc.longestMajorSeconds = Math.max(this.gc.longestMajorSeconds, s);
    }
    // A late entry may fall inside the longest block found so far.
    this.attribute(this.lastTurnBefore, this.lastTurnBefore + this.longest.seconds * 1000);
  }

  private prune(now: number): void {
    for (const spans of [this.pieces, this.gcs]) {
      while (spans.length > 0 && spans[0].end < now - KEEP_SPANS_MS && spans[0].end < this.lastTurnBefore) {
        spans.shift();
      }
    }
  }
}

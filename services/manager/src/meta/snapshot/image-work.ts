// What producing a snapshot image or restoring one cost this member: how long it took and
// the longest event-loop block meanwhile (the loop must keep answering Raft heartbeats and
// Emit: at fleet scale a block past the election timeout deposes a leader). Shown on
// /metrics (image-work-metrics.ts); bench/scale/group.ts reads it from there.

import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Counter, Gauge, type Registry } from 'prom-client';
import { LoopBlockTracer, type GcFigures, type LoopBlock } from './loop-blocks';

export type ImageWorkKind = 'snapshot' | 'restore';

export interface ImageWork {
  kind: ImageWorkKind;
  bytes: number;
  seconds: number;
  /** The longest event-loop delay seen while the work ran (a 2 ms timer's lateness: blocks shorter than that read as 2 ms or less). */
  longestBlockSeconds: number;
  /** The longest block as the tracer saw it (a 1 ms timer), taken apart: the image's pieces, GC, the rest. */
  block: LoopBlock;
  /** The longest single piece of the image's own work. */
  longestPieceSeconds: number;
  /** All the pieces' own work together (first to last piece minus this: the turns given to everything else). */
  pieceSeconds: number;
  /** V8 collections meanwhile. */
  gc: GcFigures;
  /** A snapshot's first phase: how long apply (and so every write's acknowledgement) waited for it. */
  applyHeldSeconds?: number;
}

/** Starts measuring; end() stops and returns the figures. */
export function meterImageWork(kind: ImageWorkKind): { piece<T>(work: () => T): T; end(bytes: number): ImageWork } {
  const started = performance.now();
  const delay = monitorEventLoopDelay({ resolution: 2 });
  delay.enable();
  const tracer = new LoopBlockTracer();
  let ended: ImageWork | undefined;
  return {
    piece: (work) => tracer.piece(work),
    end(bytes) {
      if (ended) return ended;
      delay.disable();
      // The histogram holds nothing when no timer fired (work shorter than the resolution).
      const longest = delay.count > 0 ? delay.max / 1e9 : 0;
      const traced = tracer.end();
      ended = { kind, bytes, seconds: (performance.now() - started) / 1000, longestBlockSeconds: longest, ...traced };
      return ended;
    },
  };
}

/** The pieces of `chunks`, each timed by `meter`; `taken` is told their total size when the last is taken or the reader stops early. */
export function* meteredChunks(chunks: Iterator<Uint8Array>, meter: { piece<T>(work: () => T): T }, taken: (bytes: number) => void): Generator<Uint8Array> {
  let bytes = 0;
  try {
    const next = () => chunks.next();
    for (let piece = meter.piece(next); !piece.done; piece = meter.piece(next)) {
      bytes += piece.value.byteLength;
      yield piece.value;
    }
  } finally {
    taken(bytes);
  }
}

/** kcm_meta_image_*: the last snapshot and restore of this member, and how many there were. */
export function registerImageWorkMetrics(registry: Registry): (work: ImageWork) => void {
  const last = new Map<ImageWorkKind, ImageWork>();
  const count = new Counter({ name: 'kcm_meta_images_total', help: 'Snapshot images produced (kind=snapshot) and restored (kind=restore) by this member', labelNames: ['kind'], registers: [registry] });
  const gauge = (name: string, help: string, read: (w: ImageWork) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['kind'],
      registers: [registry],
      collect() {
        for (const [kind, work] of last) this.set({ kind }, read(work));
      },
    });
  gauge('kcm_meta_image_bytes', 'Size of the last snapshot image produced or restored', (w) => w.bytes);
  gauge('kcm_meta_image_seconds', 'Time the last snapshot image took to produce (first piece to stored) or restore', (w) => w.seconds);
  gauge('kcm_meta_image_loop_block_max_seconds', 'Longest event-loop block while the last snapshot image was produced or restored', (w) => w.longestBlockSeconds);
  gauge('kcm_meta_image_traced_block_seconds', 'Longest gap between turns of a 1 ms timer while the last image was produced or restored', (w) => w.block.seconds);
  gauge('kcm_meta_image_traced_block_piece_seconds', 'Of the traced longest block: time inside the image\'s own pieces', (w) => w.block.pieceSeconds);
  gauge('kcm_meta_image_traced_block_gc_seconds', 'Of the traced longest block: V8 garbage collection pauses', (w) => w.block.gcSeconds);
  gauge('kcm_meta_image_traced_block_major_gc_seconds', 'Of the traced longest block: major (mark-compact) collections', (w) => w.block.majorGcSeconds);
  gauge('kcm_meta_image_traced_block_cpu_seconds', 'CPU this process used over the traced longest block (all threads): far below the block, the OS was running something else', (w) => w.block.cpuSeconds);
  gauge('kcm_meta_image_piece_max_seconds', 'Longest single piece of the last image\'s own work', (w) => w.longestPieceSeconds);
  gauge('kcm_meta_image_piece_total_seconds', 'All the pieces of the last image\'s own work together', (w) => w.pieceSeconds);
  gauge('kcm_meta_image_apply_held_seconds', 'How long the last snapshot held apply (its first phase: what apply may change)', (w) => w.applyHeldSeconds ?? w.seconds);
  gauge('kcm_meta_image_gc_max_seconds', 'Longest V8 collection pause while the last image was produced or restored', (w) => w.gc.longestSeconds);
  gauge('kcm_meta_image_gc_major_max_seconds', 'Longest major (mark-compact) collection while the last image was produced or restored', (w) => w.gc.longestMajorSeconds);
  gauge('kcm_meta_image_gc_major_count', 'Major collections while the last image was produced or restored', (w) => w.gc.majorCount);
  gauge('kcm_meta_image_gc_total_seconds', 'All V8 collection pauses while the last image was produced or restored', (w) => w.gc.totalSeconds);
  return (work) => {
    last.set(work.kind, work);
    count.inc({ kind: work.kind });
  };
}

// What producing a snapshot image or restoring one cost this member: how long it took and
// the longest event-loop block meanwhile (the loop must keep answering Raft heartbeats and
// Emit: at fleet scale a block past the election timeout deposes a leader). Shown on
// /metrics (image-work-metrics.ts); bench/scale/group.ts reads it from there.

import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Counter, Gauge, type Registry } from 'prom-client';

export type ImageWorkKind = 'snapshot' | 'restore';

export interface ImageWork {
  kind: ImageWorkKind;
  bytes: number;
  seconds: number;
  /** The longest event-loop delay seen while the work ran (a 2 ms timer's lateness: blocks shorter than that read as 2 ms or less). */
  longestBlockSeconds: number;
}

/** Starts measuring; end() stops and returns the figures. */
export function meterImageWork(kind: ImageWorkKind): { end(bytes: number): ImageWork } {
  const started = performance.now();
  const delay = monitorEventLoopDelay({ resolution: 2 });
  delay.enable();
  let ended: ImageWork | undefined;
  return {
    end(bytes) {
      if (ended) return ended;
      delay.disable();
      // The histogram holds nothing when no timer fired (work shorter than the resolution).
      const longest = delay.count > 0 ? delay.max / 1e9 : 0;
      ended = { kind, bytes, seconds: (performance.now() - started) / 1000, longestBlockSeconds: longest };
      return ended;
    },
  };
}

/** The pieces of `chunks`, told to `done` (with their total size) when the last is taken or the reader stops early. */
export function* meteredChunks(chunks: Iterator<Uint8Array>, kind: ImageWorkKind, done: (work: ImageWork) => void): Generator<Uint8Array> {
  const meter = meterImageWork(kind);
  let bytes = 0;
  try {
    for (let piece = chunks.next(); !piece.done; piece = chunks.next()) {
      bytes += piece.value.byteLength;
      yield piece.value;
    }
  } finally {
    done(meter.end(bytes));
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
  gauge('kcm_meta_image_seconds', 'Time the last snapshot image took to produce or restore, first piece to last', (w) => w.seconds);
  gauge('kcm_meta_image_loop_block_max_seconds', 'Longest event-loop block while the last snapshot image was produced or restored', (w) => w.longestBlockSeconds);
  return (work) => {
    last.set(work.kind, work);
    count.inc({ kind: work.kind });
  };
}

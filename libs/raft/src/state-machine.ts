// The contract between the driver (node.ts) and the application's replicated state.

import type { Entry, SnapshotMeta } from './core/types';

/**
 * The application state that Raft replicates. The driver calls it from its single loop,
 * never concurrently: `apply` for committed entries in log order, `snapshot` when
 * `snapshotEntries` entries were applied since the last snapshot, `restore` when a
 * snapshot replaces the local state (one sent by the leader, or on start when the stored
 * snapshot is newer than `appliedIndex()`).
 *
 * Determinism: apply must compute its result only from the entries and the current state
 * (no clocks, no randomness, no local configuration), so every member reaches the same state.
 *
 * Restart and idempotence: on start the driver resumes applying after `appliedIndex()`.
 * A state machine that persists its state must persist the applied index atomically with
 * the effects of the entries it covers; one that keeps its state in memory reports 0 (or
 * the index of the snapshot it was restored from) and gets every committed entry after
 * the stored snapshot again. Either way, an entry whose effects were saved but whose index
 * was not is applied a second time, so effects must be idempotent per index (or the
 * index and the effects saved together, which makes the question moot).
 */
export interface StateMachine {
  /**
   * Applies committed entries, in index order, and returns one result per entry:
   * `results[i]` belongs to `entries[i]` and resolves the proposal of that entry (if this
   * node proposed it). The batch contains every kind of entry: empty 'normal' entries (a
   * new leader's no-op) and 'conf' entries (the core applies membership itself) must be
   * skipped (their result is ignored), but they still advance `appliedIndex()` to the
   * last entry of the batch. An application-level failure of one command should be
   * returned as its result (e.g. an Error value), not thrown: a throw stops the node.
   */
  apply(entries: Entry[]): Promise<unknown[]> | unknown[];

  /**
   * A serialised image of the state as of `appliedIndex()`. Called between apply batches,
   * so the image must be taken synchronously or from a copy that later applies do not change.
   */
  snapshot(): Uint8Array | Promise<Uint8Array>;

  /**
   * Optional, preferred over snapshot() when present: the same image in pieces, so that a
   * large state never holds the event loop for long. The driver takes one piece per
   * event-loop turn (so each `next()` should cost a millisecond or two), and keeps
   * persisting and sending log entries meanwhile.
   *
   * `copyOnWrite: true` promises the pieces describe the state as of the call even when
   * apply runs before the last one (e.g. apply keeps the old value of whatever it changes
   * while a reader is open): the driver then goes on applying. With `false` the driver
   * holds back apply (only apply: the log is still written and acknowledged) until the
   * last piece, then applies what was committed meanwhile, in order. At most one reader
   * is open at a time.
   *
   * `frozen`, with `copyOnWrite: false`: resolves once the pieces still to come read
   * nothing apply changes (the state machine took what apply may change first, and left
   * for last what apply never changes again): the driver applies again from then on,
   * instead of waiting for the last piece.
   *
   * `done`: called once when the driver is finished with this image (stored, or given up),
   * after the pieces are written: a state machine that measures its snapshots measures them
   * to here, not only to the last piece.
   *
   * The pieces go to Storage.createSnapshot as they come, never joined (LevelStorage appends
   * each to the snapshot's file): a piece may be kept by storage until it is written, so a
   * state machine must not reuse a piece's memory after handing it out.
   */
  snapshotChunks?(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean; frozen?: Promise<void>; done?: () => void };

  /** Replaces the whole state with an image made by `snapshot()`; afterwards `appliedIndex()` is `meta.index`. */
  restore(data: Uint8Array, meta: SnapshotMeta): void | Promise<void>;

  /** The index of the last entry applied (0 for a fresh state). */
  appliedIndex(): number;
}

// The metadata state machine as Raft sees it: decodes committed commands, applies them
// with the one apply switch, and snapshots/restores the whole state as one image.
//
// State lives in memory; durability is the Raft log plus snapshots. After a restart the
// driver restores the stored snapshot and re-applies the committed entries after it,
// which is safe because apply is deterministic and has no side effects outside the state.

import type { Entry, SnapshotMeta, StateMachine } from '@kcm/raft';
import { decodeCommand, type Command } from './commands';
import { applyLogged } from './fsm';
import { UnknownCommandKindError, type ApplyStop } from './apply-stop';
import type { ApplyOutcome } from './outcome';
import { meterImageWork, meteredChunks, type ImageWork } from './snapshot/image-work';
import { runInTurns } from './snapshot/json-in-pieces';
import { restoreMetaInPieces, snapshotMeta, snapshotMetaChunks } from './snapshot/image';
import { emptyMetaState, type MetaState } from './state';

export interface MetaStateMachineHooks {
  /** Told of every applied command (after it took effect), e.g. to wake the job runner. */
  onApplied?(cmd: Command, outcome: ApplyOutcome): void;
  /** Told of every membership entry as it is applied (the core applies the change itself). */
  onConfEntry?(entry: Entry): void;
  /** Told what each snapshot image and each restore cost (snapshot/image-work.ts). */
  onImageWork?(work: ImageWork): void;
}

export class MetaStateMachine implements StateMachine {
  private meta: MetaState = emptyMetaState();
  private applied = 0;
  private stop: ApplyStop | undefined;

  constructor(private readonly hooks: MetaStateMachineHooks = {}) {}

  get state(): MetaState {
    return this.meta;
  }

  /** Set once apply met an entry holding a command kind this kcm does not know (apply-stop.ts); nothing at or after it is applied. */
  get applyStop(): ApplyStop | undefined {
    return this.stop;
  }

  /**
   * Throws, with the entry's index, at an entry holding a command kind this kcm does not know:
   * the entries before it in the batch stay applied, that entry and every later one never are.
   */
  apply(entries: Entry[]): unknown[] {
    if (this.stop) throw new UnknownCommandKindError(this.stop.kind, this.stop.index);
    const results: unknown[] = [];
    for (const entry of entries) {
      let result: unknown = undefined;
      if (entry.type === 'conf') this.hooks.onConfEntry?.(entry);
      if (entry.type === 'normal' && entry.data.byteLength > 0) {
        // A batch entry's result is the array of its commands' outcomes (RaftMetaStore hands them out).
        try {
          result = applyLogged(this.meta, decodeCommand(entry.data), this.hooks.onApplied);
        } catch (err) {
          if (!(err instanceof UnknownCommandKindError)) throw err;
          const stopped = new UnknownCommandKindError(err.kind, entry.index);
          this.stop = { index: entry.index, term: entry.term, kind: err.kind, message: stopped.message };
          throw stopped;
        }
      }
      this.applied = entry.index;
      results.push(result);
    }
    return results;
  }

  snapshot(): Uint8Array {
    return snapshotMeta(this.meta);
  }

  /**
   * The same image a piece per event-loop turn: at fleet scale (100,000 kept jobs) one
   * JSON.stringify of the whole state held the loop for longer than an election timeout.
   * Read from the live state, so the driver holds apply (not the log) until `frozen`: the
   * finished jobs, most of the image, are written after it (snapshotMetaChunks).
   */
  snapshotChunks(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean; frozen: Promise<void>; done: () => void } {
    const started = performance.now();
    // Until the driver has joined and stored the image (done), not only to the last piece: the
    // whole snapshot's blocks count (joining 44 MB in one turn was the longest, after the pieces).
    const meter = meterImageWork('snapshot');
    let bytes = 0;
    let heldSeconds: number | undefined;
    let resolveFrozen!: () => void;
    const frozen = new Promise<void>((resolve) => (resolveFrozen = resolve));
    const onFrozen = () => {
      heldSeconds ??= (performance.now() - started) / 1000;
      resolveFrozen();
    };
    const chunks = meteredChunks(snapshotMetaChunks(this.meta, onFrozen), meter, (taken) => {
      bytes = taken;
      onFrozen(); // a reader that stops early: nothing holds apply any more
    });
    const done = () => this.hooks.onImageWork?.({ ...meter.end(bytes), applyHeldSeconds: heldSeconds });
    return { chunks, copyOnWrite: false, frozen, done };
  }

  /**
   * Parses the image a few milliseconds at a time (restoreMetaInPieces): a 43 MB image in
   * one JSON.parse held the loop for 1.7 s, longer than an election timeout. The driver
   * applies nothing meanwhile; readers see the old state until the new one is complete.
   */
  async restore(data: Uint8Array, meta: SnapshotMeta): Promise<void> {
    const meter = meterImageWork('restore');
    this.meta = await runInTurns(restoreMetaInPieces(data));
    this.applied = meta.index;
    this.hooks.onImageWork?.(meter.end(data.byteLength));
  }

  appliedIndex(): number {
    return this.applied;
  }
}

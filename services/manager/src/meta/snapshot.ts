// The whole metadata state as one serialised image, for Raft snapshots.

import { rebuildFinishedJobs, rebuildRunQueues } from './jobs';
import { emptyMetaState, withDicts, type MetaState } from './state';

const SNAPSHOT_FORMAT = 1;

export function snapshotMeta(state: MetaState): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: SNAPSHOT_FORMAT, state }));
}

export function restoreMeta(image: Uint8Array): MetaState {
  if (image.byteLength === 0) return emptyMetaState();
  const parsed = JSON.parse(new TextDecoder().decode(image)) as { format: number; state: MetaState };
  if (parsed.format !== SNAPSHOT_FORMAT) throw new Error(`unsupported metadata snapshot format ${parsed.format}`);
  // Images from before the run queues or the finished-job list existed (some with the flat
  // openJobs list that came before the queues): derive them from the jobs themselves.
  const { openJobs: _superseded, ...stored } = parsed.state as MetaState & { openJobs?: unknown };
  // JSON.parse made every dict a plain object again: a key such as "toString" would then
  // read Object.prototype's. Images of every version get their dicts back here.
  const state = withDicts({ ...emptyMetaState(), ...stored });
  if (!stored.runQueues) state.runQueues = rebuildRunQueues(state);
  if (!stored.finishedJobs) state.finishedJobs = rebuildFinishedJobs(state);
  return state;
}

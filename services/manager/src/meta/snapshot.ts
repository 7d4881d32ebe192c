// The whole metadata state as one serialised image, for Raft snapshots.

import { emptyMetaState, type MetaState } from './state';

const SNAPSHOT_FORMAT = 1;

export function snapshotMeta(state: MetaState): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: SNAPSHOT_FORMAT, state }));
}

export function restoreMeta(image: Uint8Array): MetaState {
  if (image.byteLength === 0) return emptyMetaState();
  const parsed = JSON.parse(new TextDecoder().decode(image)) as { format: number; state: MetaState };
  if (parsed.format !== SNAPSHOT_FORMAT) throw new Error(`unsupported metadata snapshot format ${parsed.format}`);
  const state = { ...emptyMetaState(), ...parsed.state };
  // Images from before openJobs existed: derive it from the jobs themselves.
  if (!parsed.state.openJobs) state.openJobs = Object.fromEntries(Object.values(state.jobs).filter((j) => !j.result).map((j) => [j.id, true as const]));
  return state;
}

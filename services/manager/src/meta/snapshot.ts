// The whole metadata state as one serialised image, for Raft snapshots.

import { rebuildFinishedJobs, rebuildRunQueues } from './jobs';
import { PARSE_PIECE_BYTES, parseJsonInPieces, runToEnd } from './json-in-pieces';
import { emptyMetaState, withDictsInSteps, type JobRecord, type MetaState } from './state';

const SNAPSHOT_FORMAT = 1;

export function snapshotMeta(state: MetaState): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: SNAPSHOT_FORMAT, state }));
}

/** About this much JSON text per piece: a millisecond or two of stringifying. */
const PIECE_CHARS = 64 * 1024;
/** Objects and arrays with more members than this are written member by member, not in one JSON.stringify. */
const STREAM_OVER_MEMBERS = 64;

/**
 * The very bytes of snapshotMeta(state), in pieces of about PIECE_CHARS characters, so
 * that 100,000 kept jobs never hold the event loop for the whole image (the driver takes
 * one piece per turn: libs/raft StateMachine.snapshotChunks). Large objects and arrays
 * are written member by member (two levels deep: the state's dicts, and the dicts inside
 * its sub-states); each member with one JSON.stringify, which follows JSON.stringify's
 * rules for what it skips (undefined members of objects) or writes as null (in arrays).
 * The pieces are read from the live state: the caller must not apply meanwhile.
 */
export function* snapshotMetaChunks(state: MetaState): Generator<Uint8Array> {
  const encoder = new TextEncoder();
  let text = `{"format":${SNAPSHOT_FORMAT},"state":`;
  function* flushIfFull(): Generator<Uint8Array> {
    if (text.length < PIECE_CHARS) return;
    yield encoder.encode(text);
    text = '';
  }
  /** Writes v; `depth` levels below it may still be written member by member. */
  function* write(v: unknown, depth: number, root = false): Generator<Uint8Array> {
    const many = Array.isArray(v) ? v.length : isStreamableObject(v) ? Object.keys(v).length : 0;
    if (depth === 0 || (!root && many <= STREAM_OVER_MEMBERS)) {
      text += JSON.stringify(v) ?? 'null'; // undefined reaches here only as an array element
      yield* flushIfFull();
    } else if (Array.isArray(v)) {
      text += '[';
      for (let i = 0; i < v.length; i++) {
        if (i > 0) text += ',';
        yield* write(v[i], depth - 1);
      }
      text += ']';
    } else {
      const obj = v as Record<string, unknown>;
      text += '{';
      let first = true;
      for (const key of Object.keys(obj)) {
        const member = obj[key];
        if (JSON.stringify(member === null || typeof member !== 'object' ? member : null) === undefined) continue; // skipped, as JSON.stringify does
        text += `${first ? '' : ','}${JSON.stringify(key)}:`;
        first = false;
        yield* write(member, depth - 1);
      }
      text += '}';
    }
  }
  yield* write(state, 3, true);
  text += '}';
  yield encoder.encode(text);
}

function isStreamableObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as { toJSON?: unknown }).toJSON !== 'function';
}

export function restoreMeta(image: Uint8Array): MetaState {
  return runToEnd(restoreMetaInPieces(image));
}

/**
 * restoreMeta a piece at a time (yielding after a millisecond or a few of work), the read
 * side of snapshotMetaChunks: at fleet scale one JSON.parse of the image held the event
 * loop for 1.7 s on a restart or a follower's install. Builds a new state; the caller swaps
 * it in once the generator returns.
 */
export function* restoreMetaInPieces(image: Uint8Array, pieceBytes = PARSE_PIECE_BYTES): Generator<void, MetaState> {
  if (image.byteLength === 0) return emptyMetaState();
  // Depth 4: the image, the state, its dicts (jobs, machines...), and their members.
  // The jobs as they are parsed: Object.values of 100,000 jobs is itself a 100-200 ms block.
  const jobs: JobRecord[] = [];
  const onMemberOfWalked = (path: readonly string[], value: unknown) => {
    if (path.length === 2 && path[0] === 'state' && path[1] === 'jobs') jobs.push(value as JobRecord);
  };
  const parsed = (yield* parseJsonInPieces(image, 4, { pieceBytes, walkedObjectsAreDicts: true, onMemberOfWalked })) as { format: number; state: MetaState };
  if (parsed.format !== SNAPSHOT_FORMAT) throw new Error(`unsupported metadata snapshot format ${parsed.format}`);
  // Images from before the run queues or the finished-job list existed (some with the flat
  // openJobs list that came before the queues): derive them from the jobs themselves.
  const { openJobs: _superseded, ...stored } = parsed.state as MetaState & { openJobs?: unknown };
  // JSON.parse made every dict a plain object again: a key such as "toString" would then
  // read Object.prototype's. Images of every version get their dicts back here.
  // A small image's jobs object is parsed whole (not walked): then withDictsInSteps lists them.
  const state = yield* withDictsInSteps({ ...emptyMetaState(), ...stored }, jobs.length > 0 ? jobs : undefined);
  if (!stored.runQueues) state.runQueues = rebuildRunQueues(state);
  if (!stored.finishedJobs) state.finishedJobs = rebuildFinishedJobs(state);
  return state;
}

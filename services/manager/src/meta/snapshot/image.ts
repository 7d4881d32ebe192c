// The whole metadata state as one serialised image, for Raft snapshots.

import { rebuildFinishedJobs, rebuildRunQueues } from '../jobs';
import { PARSE_PIECE_BYTES, parseJsonInPieces, runToEnd } from './json-in-pieces';
import { emptyMetaState, withDictsInSteps, type JobRecord, type MetaState } from '../state';

const SNAPSHOT_FORMAT = 1;

export function snapshotMeta(state: MetaState): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ format: SNAPSHOT_FORMAT, state }));
}

/** About this much JSON text per piece: a millisecond or two of stringifying. */
const PIECE_CHARS = 64 * 1024;
/** Objects and arrays with more members than this are written member by member, not in one JSON.stringify. */
const STREAM_OVER_MEMBERS = 64;
/** Jobs looked up per piece while the finished ones are only set aside (no text is made for them then). */
const JOBS_SET_ASIDE_PER_PIECE = 2_000;

/** Finished jobs whose text is written after the freeze: `,"<id>":<job>` each (no comma before the dict's first member). */
interface SetAside {
  ids: number[];
  jobs: JobRecord[];
  firstInDict: boolean;
}

/**
 * The very bytes of snapshotMeta(state), in pieces of about PIECE_CHARS characters, so
 * that 100,000 kept jobs never hold the event loop for the whole image (the driver takes
 * one piece per turn: libs/raft StateMachine.snapshotChunks). Large objects and arrays
 * are written member by member (two levels deep: the state's dicts, and the dicts inside
 * its sub-states); each member with one JSON.stringify, which follows JSON.stringify's
 * rules for what it skips (undefined members of objects) or writes as null (in arrays).
 *
 * In two phases, so that apply waits only for the first: (1) everything that apply may
 * change is written (kept as encoded pieces, handed out later in image order), and the
 * finished jobs, which apply never changes again (meta/jobs.ts: only an unfinished job
 * is started, stepped, progressed, finished or cancelled; a finished one is at most
 * dropped), are only set aside by reference; then `onFrozen` is called: from there on
 * the pieces read nothing apply changes, and the caller may apply again. (2) the set-aside
 * jobs are written between the kept pieces. The finished jobs are most of the image (35
 * of 44 MB at 100,000 jobs), so apply waits for a fraction of the image's time.
 */
export function* snapshotMetaChunks(state: MetaState, onFrozen?: () => void): Generator<Uint8Array> {
  const encoder = new TextEncoder();
  const parts: (Uint8Array | SetAside)[] = [];
  let text = `{"format":${SNAPSHOT_FORMAT},"state":`;
  /** Phase 1 keeps its text (a later part may be set aside); an empty piece gives the turn back. */
  function* keep(): Generator<Uint8Array> {
    if (text.length > 0) parts.push(encoder.encode(text));
    text = '';
    yield new Uint8Array(0);
  }
  function* flushIfFull(): Generator<Uint8Array> {
    if (text.length >= PIECE_CHARS) yield* keep();
  }
  /** Runs `steps`, giving the turn back after each. */
  function* inTurns<T>(steps: Generator<void, T>): Generator<Uint8Array, T> {
    for (;;) {
      const step = steps.next();
      if (step.done) return step.value;
      yield* keep();
    }
  }
  /** state.jobs, the finished ones set aside. */
  function* writeJobs(ids: Uint32Array): Generator<Uint8Array> {
    text += '{';
    let first = true;
    let aside: SetAside | undefined;
    for (let i = 0; i < ids.length; i++) {
      if (i > 0 && ids[i] === ids[i - 1]) continue; // listed twice: never, by jobs.ts's invariant
      if (i % JOBS_SET_ASIDE_PER_PIECE === JOBS_SET_ASIDE_PER_PIECE - 1) yield* keep();
      // Looked up by number: by string, each lookup first parses the key (100,000: 50-320 ms, not 3-20).
      const job = (state.jobs as unknown as Record<number, JobRecord | undefined>)[ids[i]];
      if (job === undefined) continue; // a listed id the dict does not hold: never, by the same invariant
      if (job.result !== null) {
        if (!aside) {
          parts.push(encoder.encode(text));
          text = '';
          aside = { ids: [], jobs: [], firstInDict: first };
          parts.push(aside);
        }
        aside.ids.push(ids[i]);
        aside.jobs.push(job);
      } else {
        aside = undefined;
        text += `${first ? '' : ','}"${ids[i]}":${JSON.stringify(job)}`;
        yield* flushIfFull();
      }
      first = false;
    }
    text += '}';
  }
  /** Writes v; `depth` levels below it may still be written member by member. */
  function* write(v: unknown, depth: number, root = false): Generator<Uint8Array> {
    if (v === state.jobs && depth > 0) {
      const ids = yield* inTurns(jobIdsInKeyOrder(state));
      if (ids !== undefined) return yield* writeJobs(ids);
    }
    const keys = depth > 0 && isStreamableObject(v) ? Object.keys(v) : undefined;
    const many = Array.isArray(v) ? v.length : keys !== undefined ? keys.length : 0;
    if (depth === 0 || (!root && many <= STREAM_OVER_MEMBERS)) {
      text += JSON.stringify(v) ?? 'null'; // undefined reaches here only as an array element
      yield* flushIfFull();
    } else if (Array.isArray(v)) {
      text += '[';
      for (let i = 0; i < v.length; i++) {
        if (i > 0) text += ',';
        // A primitive inline: a nested generator per member of finishedJobs' 100,000 ids cost more than the ids.
        const member: unknown = v[i];
        if (typeof member !== 'object' || member === null) {
          text += JSON.stringify(member) ?? 'null';
          if (text.length >= PIECE_CHARS) yield* keep();
        } else {
          yield* write(member, depth - 1);
        }
      }
      text += ']';
    } else {
      const obj = v as Record<string, unknown>;
      text += '{';
      let first = true;
      for (const key of keys!) {
        const member = obj[key];
        if (JSON.stringify(member === null || typeof member !== 'object' ? member : null) === undefined) continue; // skipped, as JSON.stringify does
        text += `${first ? '' : ','}${JSON.stringify(key)}:`;
        first = false;
        if (typeof member !== 'object' || member === null) {
          text += JSON.stringify(member); // defined: undefined members were skipped above
          if (text.length >= PIECE_CHARS) yield* keep();
        } else {
          yield* write(member, depth - 1);
        }
      }
      text += '}';
    }
  }
  yield* write(state, 3, true);
  text += '}';
  parts.push(encoder.encode(text));
  text = '';
  onFrozen?.();
  // Phase 2: nothing below reads the live state (set-aside jobs are never changed by apply).
  for (const part of parts) {
    if (part instanceof Uint8Array) {
      yield part;
      continue;
    }
    for (let i = 0; i < part.jobs.length; i++) {
      text += `${i === 0 && part.firstInDict ? '' : ','}"${part.ids[i]}":${JSON.stringify(part.jobs[i])}`;
      if (text.length >= PIECE_CHARS) {
        yield encoder.encode(text);
        text = '';
      }
    }
    if (text.length > 0) yield encoder.encode(text);
    text = '';
  }
}

/** Ids gathered from the lists per piece: a few milliseconds of Number() on a loaded leader. */
const IDS_PER_PIECE = 10_000;

/**
 * state.jobs' keys in the order Object.keys gives them, without calling it: on 100,000
 * jobs (a dictionary-mode object whose keys are integers) one Object.keys was a 35-85 ms
 * block by itself, and the pieces called it twice, in one piece. Every job is either
 * unfinished, in exactly one run queue, or finished, in finishedJobs (meta/jobs.ts keeps
 * this: submit queues it, finish moves it, the drop removes it from both), and job ids
 * come from a counter, so they are array indices, which Object.keys lists in ascending
 * numeric order. Gathered a slice at a time (the pieces yield between slices), then one
 * native sort of a Uint32Array; a listed id the dict does not hold is skipped as it is
 * written. Undefined (Object.keys is used) when an id is not a canonical array index.
 */
function* jobIdsInKeyOrder(state: MetaState): Generator<void, Uint32Array | undefined> {
  const queues = Object.values(state.runQueues);
  let total = state.finishedJobs.length;
  for (const queue of queues) total += queue.length;
  const ids = new Uint32Array(total);
  let at = 0;
  const gather = function* (list: readonly string[]): Generator<void, boolean> {
    for (let i = 0; i < list.length; i++) {
      const n = Number(list[i]);
      if (!(n >= 0 && n < 0xffff_ffff && String(n) === list[i])) return false;
      ids[at++] = n;
      if (at % IDS_PER_PIECE === 0) yield;
    }
    return true;
  };
  if (!(yield* gather(state.finishedJobs))) return undefined;
  for (const queue of queues) if (!(yield* gather(queue))) return undefined;
  return ids.sort();
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

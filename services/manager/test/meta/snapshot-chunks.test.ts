// The metadata image in pieces (snapshotMetaChunks) is byte for byte the one-block image,
// so restore and older members read it unchanged, and no piece is the whole state.

import { describe, expect, it } from 'vitest';
import { dict } from '../../src/meta/dict';
import { restoreMeta, snapshotMeta, snapshotMetaChunks } from '../../src/meta/snapshot';
import { emptyMetaState, type JobRecord, type MetaState } from '../../src/meta/state';

function job(id: number): JobRecord {
  return {
    id: String(id), jobType: 'create_cluster', sentJobType: 'create_cluster', paras: { nick_name: `c${id}`, shards: '3', note: undefined },
    requestId: null, lockKey: `cluster/${id}`, status: 'done', submittedAt: 1_700_000_000_000 + id, finishedAt: 1_700_000_000_500 + id,
    stepNames: ['allocate', 'install', 'register'], stepOutputs: dict({ '0': { ports: [id, id + 1] } }), progress: null,
    result: { ok: true, errorCode: 0, errorInfo: '', attachment: null },
  } as JobRecord;
}

/** A state with thousands of jobs and the awkward cases: undefined members, prototype-looking keys, big arrays. */
function bigState(): MetaState {
  const s = emptyMetaState();
  for (let i = 1; i <= 3_000; i++) s.jobs[String(i)] = job(i);
  s.finishedJobs = Array.from({ length: 3_000 }, (_, i) => String(i + 1));
  s.requestIds['__proto__'] = '7';
  s.requestIds['toString'] = '8';
  for (let i = 0; i < 100; i++) s.requestIds[`r${i}`] = String(i);
  return s;
}

const joined = (pieces: Uint8Array[]) => Buffer.concat(pieces.map((p) => Buffer.from(p)));

describe('the metadata snapshot in pieces', () => {
  it('is byte for byte the image snapshotMeta makes, and restores to the same state', () => {
    const s = bigState();
    const pieces = [...snapshotMetaChunks(s)];
    expect(joined(pieces).equals(Buffer.from(snapshotMeta(s)))).toBe(true);
    expect(restoreMeta(joined(pieces))).toEqual(restoreMeta(snapshotMeta(s)));
  });

  it('cuts a large state into many pieces of bounded size', () => {
    const pieces = [...snapshotMetaChunks(bigState())];
    expect(pieces.length).toBeGreaterThan(10);
    for (const p of pieces) expect(p.byteLength).toBeLessThan(80 * 1024);
  });

  it('is the same image for an empty state', () => {
    const s = emptyMetaState();
    expect(joined([...snapshotMetaChunks(s)]).equals(Buffer.from(snapshotMeta(s)))).toBe(true);
  });
});

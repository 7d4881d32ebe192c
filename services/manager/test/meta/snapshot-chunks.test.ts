// The metadata image in pieces (snapshotMetaChunks) is byte for byte the one-block image,
// so restore and older members read it unchanged, and no piece is the whole state.

import { describe, expect, it } from 'vitest';
import { CommandKind, encodeCommand, type Command } from '../../src/meta/commands';
import { dict } from '../../src/meta/dict';
import { applyCommand } from '../../src/meta/fsm';
import { MetaStateMachine } from '../../src/meta/state-machine';
import { restoreMeta, snapshotMeta, snapshotMetaChunks } from '../../src/meta/snapshot/image';
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

  it('says frozen before its last piece, and apply after that changes nothing in the image (finished jobs are written last)', async () => {
    let index = 0;
    const entry = (cmd: Command) => ({ type: 'normal' as const, term: 1, index: ++index, data: encodeCommand(cmd) });
    const submit = (n: number, lockKey: string | null): Command => ({
      kind: CommandKind.JobSubmitted, at: 1_700_000_000_000 + n, jobType: 'get_cluster_summary', sentJobType: 'get_cluster_summary',
      paras: { n }, requestId: `req-${n}`, lockKey, stepNames: ['answer'],
    } as Command);
    const finish = (jobId: string, keepFinished: number): Command => ({
      kind: CommandKind.JobFinished, at: 1_700_000_000_000 + Number(jobId), jobId, keepFinished, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: { rows: 1 } },
    } as Command);
    const sm = new MetaStateMachine();
    // 3,000 finished jobs and 40 unfinished ones (some waiting behind others' lock keys).
    for (let n = 1; n <= 3_000; n++) sm.apply([entry(submit(n, null))]);
    for (let n = 1; n <= 3_000; n++) sm.apply([entry(finish(String(n), 3_000))]);
    for (let n = 3_001; n <= 3_040; n++) sm.apply([entry(submit(n, `cluster:${n % 4}`))]);
    const before = snapshotMeta(sm.state);

    const { chunks, frozen } = sm.snapshotChunks();
    let isFrozen = false;
    void frozen?.then(() => (isFrozen = true));
    const pieces: Uint8Array[] = [];
    let piecesAfterFrozen = 0;
    for (let piece = chunks.next(); !piece.done; piece = chunks.next()) {
      pieces.push(piece.value);
      await Promise.resolve(); // lets the frozen promise's callback run
      if (!isFrozen) continue;
      if (piecesAfterFrozen++ === 0) {
        // Everything apply can do meanwhile: finish the unfinished (which drops the oldest
        // finished), change what is queued, submit new jobs.
        for (let n = 3_001; n <= 3_040; n++) sm.apply([entry(finish(String(n), 3_000))]);
        for (let n = 3_041; n <= 3_060; n++) sm.apply([entry(submit(n, null))]);
      }
    }
    expect(piecesAfterFrozen).toBeGreaterThan(10); // most of the image (the finished jobs) comes after
    expect(joined(pieces).equals(Buffer.from(before))).toBe(true);
    expect(Object.keys(sm.state.jobs)).toHaveLength(3_020);
  });

  it('never lists the jobs dict\'s keys (at 100,000 jobs one Object.keys of it was a 35-85 ms piece): ids come from the run queues and finishedJobs', () => {
    const s = bigState();
    s.runQueues['cluster:1'] = ['3001', '3002'];
    s.jobs['3001'] = { ...job(3001), status: 'ongoing', result: null, finishedAt: null };
    s.jobs['3002'] = { ...job(3002), status: 'started', result: null, finishedAt: null };
    const image = snapshotMeta(s);
    let listed = 0;
    s.jobs = new Proxy(s.jobs, { ownKeys: (target) => (listed++, Reflect.ownKeys(target)) });
    const pieces = [...snapshotMetaChunks(s)];
    expect(listed).toBe(0);
    expect(joined(pieces).equals(Buffer.from(image))).toBe(true);
  });

  it('reports the snapshot\'s work (and its longest event-loop block) when the driver is done with the image, not at the last piece', async () => {
    const reported: { bytes: number; seconds: number }[] = [];
    const sm = new MetaStateMachine({ onImageWork: (work) => reported.push(work) });
    const { chunks, done } = sm.snapshotChunks();
    let bytes = 0;
    for (let piece = chunks.next(); !piece.done; piece = chunks.next()) bytes += piece.value.byteLength;
    expect(reported).toHaveLength(0); // the driver still joins and stores the pieces: that is the snapshot too
    await new Promise((resolve) => setTimeout(resolve, 20));
    done();
    expect(reported).toHaveLength(1);
    expect(reported[0].bytes).toBe(bytes);
    expect(reported[0].seconds).toBeGreaterThanOrEqual(0.015);
  });
});

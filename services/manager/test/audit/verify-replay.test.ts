// How `kcm audit verify` reads a chain replayed from the log: what it names for a changed,
// a changed-and-re-hashed and a removed record, and what it accepts (a record refused at
// apply because a leader numbered it with an old view, then sent again).

import { describe, expect, it } from 'vitest';
import { GENESIS_TIP, recordHash, sealRecord, type AuditRecord, type AuditTip } from '../../src/audit/chain';
import { replayChain } from '../../src/audit/verify';

const fields = (by: string) => ({ at: 1, by, role: 'operator', client: '127.0.0.1', via: 'm1', jobType: 'set_machine', sentJobType: 'set_machine', paras: {}, requestId: null }) as const;

/** n records chained from the genesis, at log indexes 10, 11, ... */
function chain(n: number): { record: AuditRecord; index: number }[] {
  const out: { record: AuditRecord; index: number }[] = [];
  let tip: AuditTip = GENESIS_TIP;
  for (let i = 0; i < n; i++) {
    const record = sealRecord(tip, fields(`user-${i + 1}`));
    tip = { seq: record.seq, hash: record.hash };
    out.push({ record, index: 10 + i });
  }
  return out;
}

describe('replaying the audit chain from the log', () => {
  it('accepts a whole chain, and a record refused at apply and sent again', () => {
    const logged = chain(4);
    const stale = { record: sealRecord(GENESIS_TIP, fields('old-leader-view')), index: 12 };
    const replay = replayChain(GENESIS_TIP, 'the start', [...logged.slice(0, 2), stale, ...logged.slice(2)]);
    expect(replay.problems).toEqual([]);
    expect(replay.linked).toBe(4);
    expect(replay.tip.seq).toBe(4);
  });

  it('names a changed record', () => {
    const logged = chain(4);
    logged[1] = { ...logged[1], record: { ...logged[1].record, by: 'someone-else' } };
    expect(replayChain(GENESIS_TIP, 'the start', logged).problems[0]).toBe('record 2 (log index 11) was changed: its content does not match its hash');
  });

  it('names a record changed and re-hashed: the next one no longer follows it', () => {
    const logged = chain(4);
    const { hash: _old, ...content } = { ...logged[1].record, by: 'someone-else' };
    logged[1] = { ...logged[1], record: { ...content, hash: recordHash(content) } };
    expect(replayChain(GENESIS_TIP, 'the start', logged).problems[0]).toBe(
      'record 3 (log index 12) does not follow record 2 (log index 11): record 2 was changed (and re-hashed) or replaced, or 3 was',
    );
  });

  it('names a removed record', () => {
    const logged = chain(4);
    logged.splice(1, 1);
    expect(replayChain(GENESIS_TIP, 'the start', logged).problems).toEqual(['record 2 is missing: record 3 (log index 12) comes after record 1 (log index 10) with nothing between']);
  });
});

// Which target piece each piece of a partitioned source goes to (jobs/repartition/partitions.ts):
// every source partition whole into one target partition whose bound holds it, or a refusal
// before anything is copied.

import { describe, expect, it } from 'vitest';
import { parseBound, parsePartitionRecord, pieceTargets, repointPartitionComment, type RepartitionSide } from '../../../src/jobs/repartition/partitions';

const parent = (key: string, bounds: string[], name = 'p'): RepartitionSide => ({
  kind: 'partitioned',
  parent: { schema: 'public', parent: name, key, partitions: bounds.map((bound, i) => ({ table: `${name}_${i + 1}`, shardId: String(1 + (i % 2)), bound })) },
});
const plain: RepartitionSide = { kind: 'plain', piece: { table: 't', shardId: '2', bound: '' } };
const names = { source: 'db.src', target: 'db.dst' };
const hash = (m: number) => Array.from({ length: m }, (_, r) => `FOR VALUES WITH (modulus ${m}, remainder ${r})`);

describe('pieceTargets', () => {
  it('a plain target takes every partition', () => {
    expect(pieceTargets(parent('HASH (id)', hash(4)), plain, names)).toEqual({ into: [0, 0, 0, 0] });
  });

  it('hash into hash: remainder r of modulus M goes to remainder r mod m when m divides M', () => {
    expect(pieceTargets(parent('HASH (id)', hash(4)), parent('HASH (id)', hash(2), 'q'), names)).toEqual({ into: [0, 1, 0, 1] });
    expect(pieceTargets(parent('HASH (id)', hash(2)), parent('HASH (id)', [...hash(2)].reverse(), 'q'), names)).toEqual({ into: [1, 0] });
  });

  it('hash layouts whose moduli do not divide are refused, naming the partition no target holds', () => {
    const r = pieceTargets(parent('HASH (id)', hash(2)), parent('HASH (id)', hash(4), 'q'), names);
    expect(r).toEqual({ refusal: expect.stringMatching(/no partition of db\.dst holds every row of p_1 \(FOR VALUES WITH \(modulus 2, remainder 0\)\)/) });
  });

  it('range into range: each source range inside one target range, MINVALUE and MAXVALUE unbounded', () => {
    const src = parent('RANGE (id)', ['FOR VALUES FROM (1) TO (501)', 'FOR VALUES FROM (501) TO (1001)']);
    expect(pieceTargets(src, parent('RANGE (id)', ['FOR VALUES FROM (MINVALUE) TO (1001)'], 'q'), names)).toEqual({ into: [0, 0] });
    expect(pieceTargets(src, parent('RANGE (id)', ['FOR VALUES FROM (501) TO (MAXVALUE)', 'FOR VALUES FROM (1) TO (501)'], 'q'), names)).toEqual({ into: [1, 0] });
    expect(pieceTargets(src, parent('RANGE (id)', ['FOR VALUES FROM (1) TO (300)', 'FOR VALUES FROM (300) TO (1001)'], 'q'), names)).toHaveProperty('refusal');
  });

  it('list into list: value subsets', () => {
    const src = parent('LIST (region)', ["FOR VALUES IN ('eu', 'uk')", "FOR VALUES IN ('us')"]);
    expect(pieceTargets(src, parent('LIST (region)', ["FOR VALUES IN ('us', 'ca')", "FOR VALUES IN ('eu', 'uk', 'ch')"], 'q'), names)).toEqual({ into: [1, 0] });
  });

  it('other keys or strategies, and a plain source into a partitioned target, are refused', () => {
    expect(pieceTargets(parent('HASH (id)', hash(2)), parent('RANGE (id)', ['FOR VALUES FROM (1) TO (10)'], 'q'), names)).toEqual({ refusal: expect.stringMatching(/partition keys differ \(HASH \(id\), RANGE \(id\)\)/) });
    expect(pieceTargets(parent('HASH (id)', hash(2)), parent('HASH (k)', hash(2), 'q'), names)).toHaveProperty('refusal');
    expect(pieceTargets(plain, parent('HASH (id)', hash(2), 'q'), names)).toEqual({ refusal: expect.stringMatching(/db\.src is not partitioned/) });
  });
});

describe('partition records', () => {
  it('reads what kcm_ddl writes and repoints it to another parent, keeping key and bound', () => {
    const written = '{"kcm_partition_of": ["public", "transfer_account"], "key": "HASH (id)", "bound": "FOR VALUES WITH (modulus 2, remainder 0)"}';
    expect(parsePartitionRecord(written)).toEqual({ schema: 'public', parent: 'transfer_account', key: 'HASH (id)', bound: 'FOR VALUES WITH (modulus 2, remainder 0)' });
    const moved = repointPartitionComment(written, 'transfer_account__repart_9');
    expect(parsePartitionRecord(moved)).toEqual({ schema: 'public', parent: 'transfer_account__repart_9', key: 'HASH (id)', bound: 'FOR VALUES WITH (modulus 2, remainder 0)' });
    expect(moved.startsWith('{"kcm_partition_of"')).toBe(true);
    expect(parsePartitionRecord('kcm:abc:def')).toBeUndefined();
  });

  it('parses the bounds PostgreSQL prints', () => {
    expect(parseBound("FOR VALUES FROM ('5') TO (MAXVALUE)")).toEqual({ kind: 'range', from: 5n, to: null });
    expect(parseBound('FOR VALUES FROM (1, 2) TO (3, 4)')).toBeUndefined();
  });
});

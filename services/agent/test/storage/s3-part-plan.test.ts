// Part sizing and the resume bookkeeping of S3 multipart uploads (capabilities/storage/s3/).

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BASE_PART_BYTES, MAX_PART_BYTES, MAX_PARTS, partBytes, partPlan, planCapacity } from '../../src/capabilities/storage/s3/part-plan';
import { UploadJournal } from '../../src/capabilities/storage/s3/upload-journal';

const MiB = 1024 * 1024;
const TiB = 1024 ** 4;

describe('part sizing: a stream of unknown length never runs out of the 10,000 parts', () => {
  const plan = partPlan();

  it('parts 1-1000 are 8 MiB, then the size doubles every 1000 parts, capped at 5 GiB', () => {
    expect(DEFAULT_BASE_PART_BYTES).toBe(8 * MiB);
    expect([1, 1000, 1001, 2000, 2001, 9001, MAX_PARTS].map((n) => partBytes(plan, n) / MiB)).toEqual([8, 8, 16, 16, 32, 4096, 4096]);
    expect(partBytes(partPlan(1024 * MiB), MAX_PARTS)).toBe(MAX_PART_BYTES);
  });

  it('the 10,000 parts hold more than S3\'s 5 TiB object limit; a base whose parts would not (5 MiB: 4.9 TiB) is refused', () => {
    console.log(`capacity with the 8 MiB base: ${(planCapacity(plan) / TiB).toFixed(2)} TiB; with 6 MiB: ${(planCapacity(partPlan(6 * MiB)) / TiB).toFixed(2)} TiB`);
    expect(planCapacity(plan)).toBeGreaterThan(5 * TiB);
    expect(planCapacity(partPlan(6 * MiB))).toBeGreaterThan(5 * TiB);
    expect(() => partPlan(5 * MiB)).toThrow(/less than S3's 5 TiB object/);
  });

  it('a base below 5 MiB (what S3 refuses for any part but the last) or a part number outside 1..10000 is refused', () => {
    expect(() => partPlan(4 * MiB)).toThrow(/5 MiB/);
    expect(() => partBytes(plan, 0)).toThrow(/1\.\.10000/);
    expect(() => partBytes(plan, MAX_PARTS + 1)).toThrow(/1\.\.10000/);
  });
});

describe('upload journal: an upload cut after part k continues at part k+1', () => {
  const part = (n: number) => ({ partNumber: n, bytes: 5 * MiB, md5: 'a'.repeat(32), sha256: 'b'.repeat(64), etag: `"e${n}"`, attempts: 1 });

  it('records parts in order, counts failed attempts, and reads back what it saved', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'journal-'));
    try {
      const j = UploadJournal.start(path.join(dir, 'journal.json'), 'bucket', 'p/key', 'upload-1');
      expect(j.nextPartNumber()).toBe(1);
      j.completed(part(1));
      j.completed(part(2));
      j.failed();
      j.failed();
      await j.save();
      const loaded = (await UploadJournal.load(path.join(dir, 'journal.json')))!;
      expect(loaded.uploadId).toBe('upload-1');
      expect(loaded.nextPartNumber()).toBe(3);
      expect(loaded.has(2)).toBe(true);
      expect(loaded.has(3)).toBe(false);
      expect(loaded.failedAttempts).toBe(2);
      expect(loaded.completedParts()).toEqual([{ PartNumber: 1, ETag: '"e1"' }, { PartNumber: 2, ETag: '"e2"' }]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a part completed twice or out of order is refused (a resumed upload never re-sends a recorded part)', () => {
    const j = UploadJournal.start('/nonexistent/journal.json', 'bucket', 'key', 'u');
    j.completed(part(1));
    expect(() => j.completed(part(1))).toThrow(/out of order: part 2 is next/);
    expect(() => j.completed(part(3))).toThrow(/out of order: part 2 is next/);
  });

  it('no journal is no upload in progress', async () => {
    expect(await UploadJournal.load('/nonexistent/journal.json')).toBeUndefined();
  });
});

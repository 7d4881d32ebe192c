// The sealed-object format of backup encryption at rest (docs/backup-encryption.md): a round
// trip through any split of the bytes, and each way an attacker or a broken disk could
// change a stored object (cut short, records swapped, a flipped byte, another key) refused
// with no unauthenticated byte released. The hand-decryption script reads the same format.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ObjectOpener, ObjectSealer, openAll, SEAL_HEADER_BYTES, SEAL_TAG_BYTES, sealAll, SealBroken, sealedBytesOf } from '../../src/capabilities/storage/sealed-stream';

const key = randomBytes(32);
const RECORD = 1000; // small records: many of them in a few KB

/** Feeds `bytes` in pieces of the given sizes (cycled), collecting what comes out. */
function streamThrough(step: (b: Buffer) => Buffer[], end: () => Buffer[], bytes: Buffer, sizes: number[]): Buffer {
  const out: Buffer[] = [];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = sizes[i % sizes.length];
    out.push(...step(bytes.subarray(at, at + n)));
    at += n;
  }
  out.push(...end());
  return Buffer.concat(out);
}

describe('sealed object format', () => {
  it('round trips any length, fed in any pieces, and the size is header + plaintext + one tag per record', () => {
    for (const length of [0, 1, RECORD - 1, RECORD, RECORD + 1, 3 * RECORD, 7 * RECORD + 13]) {
      const plain = randomBytes(length);
      const sealer = new ObjectSealer(key, RECORD);
      const sealed = streamThrough((b) => sealer.push(b), () => sealer.end(), plain, [1, 333, 1500, 7]);
      expect(sealed.length).toBe(sealedBytesOf(length, RECORD));
      const opener = new ObjectOpener(key);
      expect(streamThrough((b) => opener.push(b), () => opener.end(), sealed, [5, 999, 17, 4000]).equals(plain)).toBe(true);
    }
  });

  it('the sealed bytes do not contain the plaintext', () => {
    const marker = Buffer.from('marker-row-value-0123456789'.repeat(100));
    const sealed = sealAll(key, marker, RECORD);
    expect(sealed.includes(Buffer.from('marker-row-value'))).toBe(false);
  });

  it('refuses an object cut short at a record boundary (the record read as last lacks the last flag)', () => {
    const sealed = sealAll(key, randomBytes(3 * RECORD + 10), RECORD);
    const cut = sealed.subarray(0, SEAL_HEADER_BYTES + 2 * (RECORD + SEAL_TAG_BYTES));
    expect(() => openAll(key, cut)).toThrow(SealBroken);
    expect(() => openAll(key, sealed.subarray(0, sealed.length - 1))).toThrow(SealBroken);
    expect(() => openAll(key, sealed.subarray(0, SEAL_HEADER_BYTES))).toThrow(/truncated/);
  });

  it('refuses records swapped', () => {
    const sealed = sealAll(key, randomBytes(3 * RECORD), RECORD);
    const r = (i: number) => sealed.subarray(SEAL_HEADER_BYTES + i * (RECORD + SEAL_TAG_BYTES), SEAL_HEADER_BYTES + (i + 1) * (RECORD + SEAL_TAG_BYTES));
    const swapped = Buffer.concat([sealed.subarray(0, SEAL_HEADER_BYTES), r(1), r(0), r(2)]);
    expect(() => openAll(key, swapped)).toThrow(/record 0 fails authentication/);
  });

  it('refuses a flipped byte anywhere (header, ciphertext, tag) before releasing that record', () => {
    const plain = randomBytes(2 * RECORD + 5);
    const sealed = sealAll(key, plain, RECORD);
    for (const at of [3, 9, 14, SEAL_HEADER_BYTES + 1, SEAL_HEADER_BYTES + RECORD + 3, SEAL_HEADER_BYTES + RECORD + SEAL_TAG_BYTES + 10, sealed.length - 1]) {
      const bad = Buffer.from(sealed);
      bad[at] ^= 0x01;
      const opener = new ObjectOpener(key);
      const released: Buffer[] = [];
      expect(() => {
        released.push(...opener.push(bad));
        released.push(...opener.end());
      }).toThrow(SealBroken);
      // Only records before the damaged one may have come out, and they are the real plaintext.
      const out = Buffer.concat(released);
      expect(plain.subarray(0, out.length).equals(out)).toBe(true);
      expect(out.length % RECORD).toBe(0);
    }
  });

  it('refuses another key, and bytes after the last record', () => {
    const sealed = sealAll(key, randomBytes(100), RECORD);
    expect(() => openAll(randomBytes(32), sealed)).toThrow(/fails authentication/);
    const opener = new ObjectOpener(key);
    expect(() => opener.push(Buffer.concat([sealed, sealAll(key, Buffer.alloc(0), RECORD)]))).not.toThrow();
    expect(() => opener.end()).toThrow(SealBroken);
  });

  it('the documented hand-decryption script (scripts/backup-open.mjs) reads what the agent seals, and refuses a flipped byte', () => {
    const plain = randomBytes(3 * 1024 * 1024 + 77); // default 1 MiB records
    const sealed = sealAll(key, plain);
    const script = path.join(__dirname, '../../../../scripts/backup-open.mjs');
    const out = execFileSync('node', [script, key.toString('hex')], { input: sealed, maxBuffer: 64 * 1024 * 1024 });
    expect(out.equals(plain)).toBe(true);
    const bad = Buffer.from(sealed);
    bad[bad.length - 20] ^= 0x80;
    expect(() => execFileSync('node', [script, key.toString('hex')], { input: bad, maxBuffer: 64 * 1024 * 1024, stdio: ['pipe', 'pipe', 'pipe'] })).toThrow();
  });
});

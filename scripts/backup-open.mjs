#!/usr/bin/env node
// Decrypts a kcm sealed backup object by hand (docs/backup-encryption.md), with nothing but
// Node: `node scripts/backup-open.mjs <data-key-hex> < object > plain`, or with the KEK and
// the object's manifest: `node scripts/backup-open.mjs --kek <kek-base64> --manifest
// <object>.manifest.json < object > plain`. Writes only records whose tag verified; exits 1
// (after what it wrote) on a failed tag or a truncated object.
import { createDecipheriv } from 'node:crypto';
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
let dataKey;
if (args[0] === '--kek') {
  const kek = Buffer.from(args[1], 'base64');
  const meta = JSON.parse(readFileSync(args[3], 'utf8')).meta;
  const raw = Buffer.from(meta.enc_wrapped_key.slice('kcm-dek:v1:'.length), 'base64url');
  const d = createDecipheriv('aes-256-gcm', kek, raw.subarray(0, 12));
  d.setAAD(Buffer.from(`kcm backup data key v1 ${meta.enc_kek_id}`));
  d.setAuthTag(raw.subarray(44));
  dataKey = Buffer.concat([d.update(raw.subarray(12, 44)), d.final()]);
} else {
  dataKey = Buffer.from(args[0] ?? '', 'hex');
}
if (dataKey.length !== 32) throw new Error('usage: backup-open.mjs <data-key-hex> | --kek <base64> --manifest <file>');

const input = readFileSync(0);
const header = input.subarray(0, 20);
if (header.subarray(0, 8).toString('ascii') !== 'KCMSEAL1') throw new Error('not a sealed object');
const recordBytes = header.readUInt32BE(8);
const prefix = header.subarray(12, 19);
let at = 20;
for (let index = 0; ; index++) {
  const left = input.length - at;
  const last = left <= recordBytes + 16;
  const size = last ? left : recordBytes + 16;
  if (size < 16) throw new Error('truncated: no last record');
  const nonce = Buffer.alloc(12);
  prefix.copy(nonce, 0);
  nonce.writeUInt32BE(index, 7);
  nonce[11] = last ? 1 : 0;
  const d = createDecipheriv('aes-256-gcm', dataKey, nonce);
  d.setAAD(header);
  d.setAuthTag(input.subarray(at + size - 16, at + size));
  const plain = d.update(input.subarray(at, at + size - 16));
  d.final(); // throws when the tag does not verify
  process.stdout.write(plain);
  at += size;
  if (last) break;
}

// The binlog walk the archiving round runs on every listing: read in blocks, it must find
// the same first/last event times and starting GTID state as an event-by-event walk,
// across block boundaries, through an event larger than a block, and stop at a partial
// last event (a file still being written).

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { summariseBinlog } from '../../src/capabilities/mariadb/restore/binlog-files';

const MAGIC = Buffer.from([0xfe, 0x62, 0x69, 0x6e]);

function event(timestamp: number, type: number, body: Buffer): Buffer {
  const header = Buffer.alloc(19);
  header.writeUInt32LE(timestamp, 0);
  header.writeUInt8(type, 4);
  header.writeUInt32LE(19 + body.length, 9);
  return Buffer.concat([header, body]);
}

function gtidList(...gtids: [number, number, bigint][]): Buffer {
  const body = Buffer.alloc(4 + 16 * gtids.length);
  body.writeUInt32LE(gtids.length, 0);
  gtids.forEach(([domain, server, seq], i) => {
    body.writeUInt32LE(domain, 4 + i * 16);
    body.writeUInt32LE(server, 8 + i * 16);
    body.writeBigUInt64LE(seq, 12 + i * 16);
  });
  return body;
}

describe('summariseBinlog', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-binlog-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('reads times and the starting GTID state across 1 MiB blocks and an event larger than a block; stops at a partial event', async () => {
    const events = [event(1000, 15, Buffer.alloc(40)), event(0, 163, gtidList([0, 1, 41n], [2, 3, 7n]))];
    // Enough small events to cross several block boundaries at odd offsets.
    for (let i = 0; i < 60_000; i++) events.push(event(1001 + (i % 50), 2, Buffer.alloc(13 + (i % 7))));
    events.push(event(2000, 2, Buffer.alloc(1_500_000, 1))); // larger than a block
    events.push(event(1500, 2, Buffer.alloc(5))); // an older timestamp after a newer one
    const partial = event(9999, 2, Buffer.alloc(100)).subarray(0, 60); // being written
    const file = path.join(dir, 'mariadb-bin.000001');
    await writeFile(file, Buffer.concat([MAGIC, ...events, partial]));
    expect(await summariseBinlog(file)).toEqual({ startGtidState: '0-1-41,2-3-7', firstEventTime: 1000, lastEventTime: 2000 });
  });

  it('refuses a file that is not a binlog', async () => {
    const file = path.join(dir, 'not-a-binlog');
    await writeFile(file, 'hello world, not a binlog');
    await expect(summariseBinlog(file)).rejects.toThrow(/not a binlog file/);
  });
});

// Real mariadbd, through the agent API: the source side of continuous binlog archiving.
// A flush closes the file being written; the listing tells closed from open and carries
// each file's starting GTID state and event times; StreamBinlog serves the exact bytes of
// a closed file and refuses the one still being written.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentClient, MariaDbRestoreAgentClient, MariaDbRestoreAgentService, type MariaDbBinlogChunk } from '@kcm/agent-api';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

const PORT = 57111;
const DB = 'app_$$_public';
let f: ShardFixture;
let restore: MariaDbRestoreAgentClient;

async function storageSql(work: (conn: mysql.Connection) => Promise<void>): Promise<void> {
  const conn = await mysql.createConnection({ host: HOSTS[0], port: PORT, ...secrets.storage });
  try {
    await work(conn);
  } finally {
    await conn.end();
  }
}

/** One transaction (one GTID) per row. */
async function insertRows(from: number, to: number): Promise<void> {
  await storageSql(async (conn) => {
    for (let i = from; i < to; i++) await conn.query(`INSERT INTO \`${DB}\`.t VALUES (?, UNIX_TIMESTAMP())`, [i]);
  });
}

async function streamed(name: string): Promise<Buffer> {
  const client = agentClient(MariaDbRestoreAgentService, f.agents[0].address) as unknown as grpc.Client & { StreamBinlog(req: object): grpc.ClientReadableStream<MariaDbBinlogChunk> };
  try {
    const parts: Buffer[] = [];
    for await (const chunk of client.StreamBinlog({ port: PORT, name }) as AsyncIterable<MariaDbBinlogChunk>) parts.push(chunk.data);
    return Buffer.concat(parts);
  } finally {
    client.close();
  }
}

describe('binlog files of an instance for archiving (real mariadbd)', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    restore = new MariaDbRestoreAgentClient(f.agents[0].address);
    await f.clients[0].install(f.installRequest('install-binlogs', PORT, 1));
    await storageSql(async (conn) => {
      await conn.query(`CREATE DATABASE \`${DB}\``);
      await conn.query(`CREATE TABLE \`${DB}\`.t (id INT PRIMARY KEY, at BIGINT)`);
    });
  }, 150_000);

  afterAll(async () => {
    restore?.close();
    await f?.close();
  });

  it('a flush closes the current file; the listing carries GTID state and event times', async () => {
    const before = Math.floor(Date.now() / 1000);
    await insertRows(0, 5);
    const first = await restore.listBinlogs(PORT, true);
    expect(first.server_id).toBe(1);
    const closed = first.files.filter((b) => b.closed);
    const open = first.files.filter((b) => !b.closed);
    expect(open).toHaveLength(1);
    expect(open[0]).toBe(first.files.at(-1));
    const lastClosed = closed.at(-1)!;
    expect(lastClosed.last_event_time).toBeGreaterThanOrEqual(before);
    // The new file starts where the closed one ended: its GTID state includes the 2 DDL and 5 inserts.
    expect(open[0].start_gtid_state).toMatch(/^0-1-\d+$/);
    const seqAfterWrites = Number(open[0].start_gtid_state.split('-')[2]);
    expect(seqAfterWrites).toBeGreaterThanOrEqual(7);

    await insertRows(5, 8);
    const second = await restore.listBinlogs(PORT, true);
    const newest = second.files.at(-1)!;
    expect(Number(newest.start_gtid_state.split('-')[2])).toBe(seqAfterWrites + 3);
    expect(second.files.find((b) => b.name === open[0].name)?.closed).toBe(true);
  }, 60_000);

  it('StreamBinlog serves the exact bytes of a closed file and refuses the open one', async () => {
    const listing = await restore.listBinlogs(PORT, false);
    const closed = listing.files.filter((b) => b.closed).at(-1)!;
    const onDisk = await readFile(path.join(f.tmp, 'wal', String(PORT), 'binlog', closed.name));
    const bytes = await streamed(closed.name);
    expect(bytes.length).toBe(closed.size);
    expect(bytes.equals(onDisk)).toBe(true);
    await expect(streamed(listing.files.at(-1)!.name)).rejects.toThrow(/still being written/);
    await expect(streamed('../../etc/passwd')).rejects.toThrow(/must look like mariadb-bin/);
  }, 60_000);
});

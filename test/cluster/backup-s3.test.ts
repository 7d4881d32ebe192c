// stype s3 end to end on real engines, through s3rver: the S3-compatible STAND-IN for a real
// S3 (Ceph's radosgw is too heavy for these machines; docs/backup-s3.md says what the stand-in
// does not prove), on 127.0.5.2. create_backup_storage checks the bucket answers before it
// records anything and seals the secret key; a full backup of a 1-shard cluster and its
// archived binlogs go into the bucket; cluster_restore reads them back into a new cluster
// and the rows are there. Then a backup whose upload is cut (iptables) after its first part:
// it resumes at the part it was on, every part stored once under one upload id.

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterRecord } from '@kcm/manager';
import { emit, emitRaw, waitForJobEnd } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { HOSTS, startClusterFixture, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';
import { startS3StandIn, type S3StandIn } from '../../services/agent/test/storage/s3-stand-in';

const AGENT_PORT = 58168;
const MEMBER = '127.0.1.68:58168';
const STAND_IN = { address: '127.0.5.2', port: 59420 };
const DB = 'postgres_$$_public';
/** Sent once with a wrong secret: it must appear nowhere kcm keeps or says anything. */
const WRONG_SECRET = 'not-the-secret-5c1e';
const run = promisify(execFile);
/** Cuts every connection to the stand-in: a reset for each packet sent to its port. */
const CUT = ['OUTPUT', '-d', STAND_IN.address, '-p', 'tcp', '--dport', String(STAND_IN.port), '-j', 'REJECT', '--reject-with', 'tcp-reset'];
/** Packets the cut rejected so far (iptables' counter of the rule). */
async function rejectedPackets(): Promise<number> {
  const { stdout } = await run('iptables', ['-L', 'OUTPUT', '-v', '-x', '-n']);
  const line = stdout.split('\n').find((l) => l.includes('REJECT') && l.includes(STAND_IN.address) && l.includes(`dpt:${STAND_IN.port}`));
  return line ? Number(line.trim().split(/\s+/)[0]) : 0;
}

describe('s3 backup storage on real engines through the s3rver stand-in: backup, archived binlogs, restore', () => {
  let f: ClusterFixture;
  let standIn: S3StandIn;
  let src: ClusterRecord;
  let dst: ClusterRecord;
  const s3Paras = () => ({ name: 'bucket', stype: 's3', hostaddr: HOSTS[0], port: String(AGENT_PORT), path: path.join(f.tmp, 's3-spool'), endpoint: standIn.endpoint, bucket: standIn.bucket, prefix: 'kcm/prod', ...standIn.credentials });
  const cluster = (id: string) => f.manager.store.state().clusters[id];
  const master = (c: ClusterRecord) => {
    const shard = Object.values(c.shards)[0];
    const m = shard.nodes[shard.masterNodeId];
    return { host: m.hostaddr, port: m.port };
  };
  async function onMaster<T>(c: ClusterRecord, work: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    const conn = await mysql.createConnection({ ...master(c), ...openTestAccounts(c.accounts).storage, connectTimeout: 5000 });
    try {
      return await work(conn);
    } finally {
      await conn.end();
    }
  }
  const summary = (c: ClusterRecord) =>
    onMaster(c, async (conn) => {
      const [rows] = await conn.query(`SELECT COUNT(*) AS n, COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', id, v))), 0) AS checksum FROM \`${DB}\`.t`);
      const r = (rows as { n: number; checksum: string | number }[])[0];
      return { n: Number(r.n), checksum: String(r.checksum) };
    });
  const insert = (from: number, to: number) =>
    onMaster(src, async (conn) => {
      for (let id = from; id < to; id++) await conn.query(`INSERT INTO \`${DB}\`.t (id, v) VALUES (?, ?)`, [id, `row-${id}`]);
    });

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    await registerMachines(f);
    standIn = await startS3StandIn(STAND_IN.address, STAND_IN.port, path.join(f.tmp, 's3-stand-in'));
  }, 120_000);

  afterAll(async () => {
    await run('iptables', ['-D', ...CUT]).catch(() => {});
    await f?.close();
    await standIn?.close();
  }, 120_000);

  it('bad s3 paras are refused naming the field, and nothing is recorded', async () => {
    const refusal = async (paras: Record<string, unknown>) => (await emitRaw(MEMBER, 'create_backup_storage', paras)).error_info;
    expect(await refusal({ ...s3Paras(), bucket: 'Has_Upper' })).toMatch(/paras\.bucket/);
    expect(await refusal({ ...s3Paras(), endpoint: 'ftp://x' })).toMatch(/paras\.endpoint/);
    expect(await refusal({ ...s3Paras(), prefix: '/lead' })).toMatch(/paras\.prefix/);
    const { secret_access_key: _, ...noSecret } = s3Paras();
    expect(await refusal(noSecret)).toMatch(/paras\.secret_access_key: required for stype s3/);
    expect(await refusal({ name: 'x', stype: 'fs', hostaddr: HOSTS[0], port: String(AGENT_PORT), path: '/tmp/x', bucket: 'abc' })).toMatch(/paras\.bucket: only stype s3 takes it/);
    // A bucket that does not exist does not answer the agent: the job fails before recording.
    // (s3rver does not check signatures, so a wrong secret alone would pass the stand-in.)
    const wrong = await f.runJob('create_backup_storage', { ...s3Paras(), bucket: 'no-such-bucket', secret_access_key: WRONG_SECRET }, 60_000);
    expect(wrong.status).toBe('failed');
    expect(wrong.error_info).toMatch(/step 1 of 2 \(open storage\) failed: .*s3 storage no-such-bucket\/kcm\/prod at http:\/\/127\.0\.5\.2:59420: asking whether the bucket answers \(HeadBucket\) failed: HTTP 404/);
    expect(f.manager.store.state().backupStorages).toEqual({});
  }, 120_000);

  it('create_backup_storage records the bucket with its secret key sealed; get_backup_storage shows the bucket, never a secret', async () => {
    const created = await f.runJob('create_backup_storage', s3Paras(), 60_000);
    expect(created.status, created.error_info).toBe('done');
    const record = f.manager.store.state().backupStorages.bucket;
    expect(record).toMatchObject({ stype: 's3', s3: { endpoint: standIn.endpoint, bucket: 'kcm-backups', prefix: 'kcm/prod', region: 'us-east-1', accessKeyId: 'S3RVER' } });
    expect(record.s3!.sealedSecretAccessKey).toMatch(/^kcm-sealed:v1:/);
    const listed = (await emit(MEMBER, 'get_backup_storage')).attachment as { list_backup_storage: Record<string, unknown>[] };
    expect(listed.list_backup_storage[0]).toMatchObject({ name: 'bucket', stype: 's3', endpoint: standIn.endpoint, bucket: 'kcm-backups', prefix: 'kcm/prod' });
    expect(JSON.stringify(listed)).not.toMatch(/secret|sealed/i);
    // The paras as committed (job records) hold the sealed secret only; the wrong one is nowhere.
    const everything = JSON.stringify(f.manager.store.state()) + f.logLines.join('');
    expect(everything).not.toContain(WRONG_SECRET);
    expect(everything).not.toMatch(/"secret_access_key":"S3RVER"/);
  }, 120_000);

  it('a full backup of a cluster and its archived binlogs go into the bucket', async () => {
    const [a, b] = await Promise.all([
      f.runJob('create_cluster', clusterParas({ nick_name: 'source' }), 300_000),
      f.runJob('create_cluster', clusterParas({ nick_name: 'restored', computer_iplists: [HOSTS[1]] }), 300_000),
    ]);
    expect(a.status, a.error_info).toBe('done');
    expect(b.status, b.error_info).toBe('done');
    src = cluster(String(a.attachment!.cluster_id));
    dst = cluster(String(b.attachment!.cluster_id));
    await onMaster(src, async (c) => {
      await c.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
      await c.query(`CREATE TABLE \`${DB}\`.t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
    });
    await insert(1, 101);
    const backup = await f.runJob('manual_backup_cluster', { cluster_id: src.id }, 300_000);
    expect(backup.status, backup.error_info).toBe('done');
    const set = Object.values(f.manager.store.state().backupSets).find((s) => s.clusterId === src.id)!;
    const shardKey = set.shards[0].key;
    // In the bucket under the prefix: the object's parts and its manifest, written after it.
    const puts = standIn.requests.filter((r) => r.method === 'PUT' && r.status === 200);
    expect(puts.some((r) => r.key === `kcm/prod/${shardKey}` && r.partNumber === 1)).toBe(true);
    expect(puts.some((r) => r.key === `kcm/prod/${shardKey}.manifest.json`)).toBe(true);
    await insert(101, 151); // after the backup: replayed from the archived binlogs
  }, 700_000);

  it('cluster_restore reads the backup and the binlogs back from the bucket: the restored cluster holds the source\'s rows', async () => {
    const expected = await summary(src);
    expect(expected.n).toBe(150);
    const restoreTime = Math.floor(Date.now() / 1000) + 1;
    await sleep(restoreTime * 1000 + 1100 - Date.now());
    const paras = { src_cluster_id: src.id, dst_cluster_id: dst.id, restore_time: String(restoreTime) };
    let reply;
    for (;;) {
      const ack = await emitRaw(MEMBER, 'cluster_restore', paras);
      if (ack.error_code === '0') {
        reply = await waitForJobEnd([MEMBER], ack.job_id, 300_000);
        break;
      }
      // The archive reaches the restore time within a few archiver rounds.
      if (!/beyond the archived binlogs/.test(ack.error_info)) throw new Error(`cluster_restore refused: ${ack.error_info}`);
      await sleep(500);
    }
    expect(reply.status, reply.error_info).toBe('done');
    expect(await summary(cluster(dst.id))).toEqual(expected);
    const binlogs = standIn.requests.filter((r) => r.method === 'PUT' && r.status === 200 && /binlog/.test(r.key) && r.key.endsWith('.manifest.json'));
    console.log(`restored ${expected.n} rows from the s3 stand-in: ${binlogs.length} archived binlog object(s) in the bucket`);
    expect(binlogs.length).toBeGreaterThan(0);
  }, 400_000);

  it('a backup whose upload is cut (iptables REJECT with tcp-reset on the stand-in\'s port) after its first part resumes: every part stored once, one upload id, the failed attempts in its manifest', async () => {
    // 40 MB of random bytes (zstd cannot shrink them): the stored object spans five or more 8 MiB parts.
    await onMaster(src, async (c) => {
      await c.query(`CREATE TABLE \`${DB}\`.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL) ENGINE=InnoDB`);
      for (let i = 0; i < 40; i++) await c.query(`INSERT INTO \`${DB}\`.blobs (id, b) VALUES (?, ?)`, [i, randomBytes(1024 * 1024)]);
    });
    const seen = standIn.requests.length;
    const firstPart = () => standIn.requests.slice(seen).find((r) => r.method === 'PUT' && r.partNumber === 1 && r.status === 200 && r.key.endsWith('.mbstream'));
    const ack = await emitRaw(MEMBER, 'manual_backup_cluster', { cluster_id: src.id });
    expect(ack.error_code, ack.error_info).toBe('0');
    let cut = false;
    try {
      for (let i = 0; !firstPart(); i++) {
        if (i > 30_000) throw new Error('no part 1 of the backup reached the stand-in');
        await sleep(10);
      }
      await run('iptables', ['-I', ...CUT]);
      cut = true;
      // Evidence that the upload met the cut: the rule rejected the agent's packets.
      for (let i = 0; (await rejectedPackets()) === 0; i++) {
        if (i > 600) throw new Error('the cut rejected no packet');
        await sleep(100);
      }
      await sleep(1500); // a few retries against the cut, backing off
      await run('iptables', ['-D', ...CUT]);
      cut = false;
    } finally {
      if (cut) await run('iptables', ['-D', ...CUT]).catch(() => {});
    }
    const reply = await waitForJobEnd([MEMBER], ack.job_id, 300_000);
    expect(reply.status, reply.error_info).toBe('done');
    const key = firstPart()!.key;
    const parts = standIn.requests.slice(seen).filter((r) => r.method === 'PUT' && r.key === key && r.partNumber !== undefined && r.status === 200);
    const numbers = parts.map((r) => r.partNumber!);
    const manifest = JSON.parse(await readFile(path.join(standIn.directory, standIn.bucket, `${key}.manifest.json._S3rver_object`), 'utf8')) as { upload: { parts: { attempts: number }[]; failed_attempts: number } };
    console.log(`cut backup: parts stored ${numbers.join(',')} (upload ${parts[0].uploadId}); failed attempts ${manifest.upload.failed_attempts}; attempts per part ${manifest.upload.parts.map((p, i) => `${i + 1}:${p.attempts}`).join(' ')}`);
    expect(numbers.length).toBeGreaterThanOrEqual(3);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1)); // 1..n, each once: never restarted at part 1
    expect(new Set(parts.map((r) => r.uploadId)).size).toBe(1);
    expect(manifest.upload.failed_attempts).toBeGreaterThan(0);
    expect(manifest.upload.parts.some((p) => p.attempts > 1)).toBe(true);
  }, 400_000);
});

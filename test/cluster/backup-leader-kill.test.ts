// Full and metadata backups in a 3-manager group on real engines: three manager processes
// (127.0.1.84-86), three agent processes (127.0.2.84-86), a cluster of 1 shard x 3 MariaDB
// nodes and 1 compute node, backup storage a directory on the first host.
//
// 1. The leader is SIGKILLed while a full backup streams (throttled to 1 MB/s so it is
//    under way): the new leader resumes the job, joins the copy already running on the
//    storage agent (the same op_id), and the job ends done with one copy per shard.
// 2. A metadata backup (cluster_id -1) is taken, the whole group is stopped, and a brand-new
//    group (127.0.1.87-89, empty data dirs) is started from it with --restore-meta: it
//    answers get_cluster_summary and get_machine_summary as the old one did.

import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualBackupClusterResult } from '@kcm/protocol';
import { emit, findLeader, jobStatus } from '../helpers/emit-client';
import { STARTUP_TIMEOUT_MS } from '../manager/helpers/group';
import { MANAGER_MAIN, ManagedProcess, sleep, waitFor } from '../manager/helpers/processes';
import { managerTls } from '../helpers/pki';
import { clusterParas } from './cluster-paras';
import { startGroupFixture, type GroupFixture } from './group-fixture';
import { testSecretsKeyFile } from '../helpers/secrets';
import { testTokenConfig } from '../helpers/tokens';

const MEMBERS = ['127.0.1.84:18500', '127.0.1.85:18500', '127.0.1.86:18500'];
const NEW_MEMBERS = ['127.0.1.87:18500', '127.0.1.88:18500', '127.0.1.89:18500'];
const HOSTS = ['127.0.2.84', '127.0.2.85', '127.0.2.86'];
const AGENT_PORT = 18590;
// Port ranges no other host or test uses (cgroups are named by kind and port only).
const storagePorts = (i: number) => `${54100 + 20 * i}-${54119 + 20 * i}`;
const computerPorts = (i: number) => `${54200 + 10 * i}-${54209 + 10 * i}`;

describe('backups in a 3-manager group on real engines', () => {
  let g: GroupFixture;
  const restored: ManagedProcess[] = [];
  let clusterId: string;
  const root = () => path.join(g.group.dir, 'backups');

  beforeAll(async () => {
    g = await startGroupFixture({
      name: 'backup-kill', members: MEMBERS, hosts: HOSTS, agentPort: AGENT_PORT, managerConfig: { backupPvLimitMb: 1, tickMs: 50 },
      machines: { storagePorts, computerPorts },
    });
    const created = await g.runJob('create_cluster', clusterParas({ nick_name: 'kept' }, HOSTS), 300_000);
    expect(created.status, created.error_info).toBe('done');
    const result = created.attachment as { cluster_id: string; storage_user: string; storage_pwd: string };
    clusterId = result.cluster_id;
    // Rows on the shard, so its backup has a GTID position to record.
    const detail = await emit(g.live()[0], 'get_cluster_detail', { cluster_id: clusterId });
    const master = (detail.attachment as { list_shard: { list_node: { hostaddr: string; port: string; master: string }[] }[] }).list_shard[0].list_node.find((n) => n.master === 'true')!;
    const c = await mysql.createConnection({ host: master.hostaddr, port: Number(master.port), user: result.storage_user, password: result.storage_pwd });
    await c.query('CREATE DATABASE `postgres_$$_public`');
    await c.query('CREATE TABLE `postgres_$$_public`.kept (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(1000) NOT NULL)');
    for (let i = 0; i < 50; i++) await c.query("INSERT INTO `postgres_$$_public`.kept (note) VALUES (REPEAT('k', 1000))");
    await c.end();
    const storage = await g.runJob('create_backup_storage', { name: 'local', stype: 'fs', hostaddr: HOSTS[0], port: String(AGENT_PORT), path: root() });
    expect(storage.status, storage.error_info).toBe('done');
  }, 480_000);

  afterAll(async () => {
    await Promise.all(restored.map((p) => p.kill()));
    await g?.close();
  }, 60_000);

  it('the leader SIGKILLed during a full backup: the job ends done, with one copy of the shard and its checksum', async () => {
    const leader = await g.group.waitForLeader();
    const jobId = await g.submit('manual_backup_cluster', { cluster_id: clusterId }, [leader]);
    // Kill the leader once the storage agent is writing the shard's object.
    const partialDir = path.join(root(), `cluster_${clusterId}`, `backup_${jobId}`);
    await waitFor('the shard backup to be streaming', () => readdirSync(partialDir, { withFileTypes: true }).some((e) => e.name.includes('.partial-')), 60_000, 100);
    await sleep(1500);
    await g.group.manager(leader).kill();
    const killedAt = Date.now();
    const newLeader = await g.group.waitForLeader(undefined, 30_000);
    expect(newLeader).not.toBe(leader);
    const end = await g.waitForEnd(jobId, 240_000);
    expect(end.status, end.error_info).toBe('done');
    console.log(`backup done ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the leader was killed`);
    const backup = end.attachment as ManualBackupClusterResult;
    expect(backup.list_shard).toHaveLength(1);
    expect(backup.list_shard[0].gtid_pos).toMatch(/^\d+-\d+-\d+/);
    // One copy per shard: the new leader joined the pull under way instead of starting another.
    const stored = g.group.agent(HOSTS[0]).logLines().filter((l) => l.msg === 'backup stored');
    expect(stored.map((l) => l.key)).toEqual([backup.list_shard[0].location.replace(/^local:/, '')]);
    // ...which was still streaming when the leader died.
    expect(Date.parse(String(stored[0].time))).toBeGreaterThan(killedAt);
    expect(readdirSync(partialDir).filter((n) => n.includes('.partial-'))).toEqual([]);
    // The stream limit (backupPvLimitMb 1) held on the shard's own bytes, on the compressed
    // stream's relayed path (backup-compression.ts): the copy took at least raw bytes / limit.
    expect(stored[0].compression).toBe('zstd');
    const mbPerS = Number(stored[0].raw_bytes) / 2 ** 20 / (Number(stored[0].ms) / 1000);
    console.log(`backup copy: ${(Number(stored[0].raw_bytes) / 2 ** 20).toFixed(1)} MB in ${String(stored[0].ms)} ms = ${mbPerS.toFixed(2)} MB/s (limit 1)`);
    expect(mbPerS).toBeLessThanOrEqual(1.1);
    const started = HOSTS.flatMap((h) => g.group.agent(h).logLines()).filter((l) => l.msg === 'streaming backup over the data plane');
    expect(started).toEqual([expect.objectContaining({ pv_limit_mb: 1, compress: 'zstd', piped: false })]);
    // And the set is recorded once, listed by get_cluster_detail.
    const detail = await emit(newLeader, 'get_cluster_detail', { cluster_id: clusterId });
    expect((detail.attachment as { list_backup: { backup_id: string }[] }).list_backup.map((b) => b.backup_id)).toEqual([jobId]);
  }, 300_000);

  it('a metadata backup (-1) restored into a fresh group answers get_cluster_summary and get_machine_summary as before', async () => {
    const meta = await g.runJob('manual_backup_cluster', { cluster_id: '-1' });
    expect(meta.status, meta.error_info).toBe('done');
    const result = meta.attachment as ManualBackupClusterResult;
    const before = {
      clusters: withoutMeasurementAge((await emit(g.live()[0], 'get_cluster_summary')).attachment),
      machines: (await emit(g.live()[0], 'get_machine_summary')).attachment,
    };
    await Promise.all([...g.group.managers.values()].map((m) => m.kill()));

    const backupFile = path.join(root(), result.location!.replace(/^local:/, ''));
    for (const [i, member] of NEW_MEMBERS.entries()) {
      const dir = path.join(g.group.dir, `restored-${i + 1}`);
      mkdirSync(dir, { recursive: true });
      const config = path.join(dir, 'manager.json');
      writeFileSync(config, JSON.stringify({ member, dataDir: path.join(dir, 'data'), initialMembers: NEW_MEMBERS, agentPort: AGENT_PORT, tickMs: 50, logLevel: 'info', tokens: testTokenConfig(), secretsKeyFile: testSecretsKeyFile(), plainHttp: true, ...managerTls(member) }));
      const p = new ManagedProcess(`restored manager ${member}`, [MANAGER_MAIN, '--config', config, '--restore-meta', backupFile], path.join(dir, 'manager.log'));
      restored.push(p);
      p.start();
    }
    const leader = await waitFor('a leader of the restored group', () => findLeader(NEW_MEMBERS), STARTUP_TIMEOUT_MS * 2, 250);
    const seeded = restored[0].logLines().find((l) => l.msg === 'metadata restored from backup: this member starts a new group from it');
    expect(seeded).toMatchObject({ backupJobId: result.backup_id, clusters: 1, machines: 6 });
    const after = {
      clusters: withoutMeasurementAge((await emit(leader, 'get_cluster_summary')).attachment),
      machines: (await emit(leader, 'get_machine_summary')).attachment,
    };
    expect(after).toEqual(before);
    // The backup job itself is closed as done in the new group; kept jobs answer get_status.
    expect((await jobStatus(leader, result.backup_id)).status).toBe('done');
    expect((await jobStatus(leader, '1')).status).toBe('done');
    expect((await emit(leader, 'get_meta_mode')).attachment).toMatchObject({ mode: 'mgr' });
  }, 240_000);
});

/** A summary without each cluster's measured_age_ms: how old a measurement is differs between two groups' answers by nature. */
function withoutMeasurementAge(summary: unknown): unknown {
  const { list_cluster } = summary as { list_cluster: Record<string, unknown>[] };
  return { list_cluster: list_cluster.map(({ measured_age_ms: _age, ...rest }) => rest) };
}

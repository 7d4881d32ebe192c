// create_backup_storage, delete_backup_storage and manual_backup_cluster against fake agents
// and a recording in-memory storage (real engines and a real storage agent:
// test/cluster/backup.test.ts, test/backup/).

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { MariaDbBackupSource, MariaDbProbeReply, PgSchemaDumpReply } from '@kcm/agent-api';
import type { KcmError } from '@kcm/protocol';
import { manualBackupClusterJob, type BackupJobDeps } from '../../src/jobs/backup';
import { createBackupStorageJob, deleteBackupStorage } from '../../src/jobs/backup-storage';
import { registryOf } from '../../src/jobs/registry';
import { JobRunner } from '../../src/jobs/framework/runner';
import { ManagerService } from '../../src/submit/manager-service';
import { backupQueriesFor } from './backup-queries';
import type { BackupStorage, StoredObject } from '../../src/backup/storage';
import { newestFullBackupBefore } from '../../src/meta/backup';
import type { BackupStorageRecord } from '../../src/meta/state';
import { until } from '../helpers/local-store';
import { stepServices } from '../helpers/step-services';
import { AGENT_PORT, request, startHarness } from './grow-harness';
import { testSecretBox } from '../../../../test/helpers/secrets';
import { openKek, unwrapDataKey } from '../../src/secrets/backup-keys';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A storage that keeps objects in memory and records each physical backup it was asked for. */
function memoryStorages() {
  const objects = new Map<string, StoredObject>();
  const pulls: { opId: string; key: string; source: MariaDbBackupSource; pvLimitMb: number; compression?: string; meta?: Record<string, string>; dataKey?: Buffer }[] = [];
  const deletes: string[] = [];
  let failPullOf: string | undefined;
  const hooks: { duringPull?: () => Promise<void> } = {};
  const open = (record: BackupStorageRecord): BackupStorage => ({
    record,
    open: async () => ({ freeBytes: 1e12 }),
    async storePhysicalBackup(opId, key, source, pvLimitMb, meta = {}, compression = '', dataKey = undefined) {
      pulls.push({ opId, key, source, pvLimitMb, compression, meta, dataKey });
      await hooks.duringPull?.();
      if (failPullOf && key.includes(failPullOf)) throw new Error(`mariabackup failed on ${source.hostaddr}:${source.port}`);
      // The manifest keeps what the job gave (a sealed object's wrapped key), as the storage agent does.
      const object = { key, bytes: 5000, sha256: sha(Buffer.from(key)), createdAtMs: 0, meta: { ...meta, ...(dataKey ? { sealed_at: 'source' } : {}), gtid_pos: '0-1-42', source: `${source.hostaddr}:${source.port}` } };
      objects.set(`${record.name}:${key}`, object);
      return { object, gtidPos: '0-1-42', transferMs: 7, rawBytes: compression ? 8000 : 5000, compression };
    },
    async put(key, data) {
      const bytes = data instanceof Uint8Array ? data : Buffer.alloc(0);
      const object = { key, bytes: bytes.length, sha256: sha(bytes), createdAtMs: 0, meta: {} };
      objects.set(`${record.name}:${key}`, object);
      return object;
    },
    get: () => (async function* () {})(),
    verify: async (key) => ({ key, ok: true, problem: '' }),
    list: async () => [],
    delete: async (_op, prefix) => {
      deletes.push(prefix);
      return 1;
    },
    locate: (key) => ({ stype: 'fs', address: `${record.hostaddr}:${record.port}`, root: record.path, key }),
    close: () => {},
  });
  return { open, objects, pulls, deletes, hooks, failPull: (what: string) => (failPullOf = what) };
}

const standbyProbe = (lag: number): Partial<MariaDbProbeReply> => ({ state: 'online', is_replica: true, io_running: true, sql_running: true, seconds_behind_master: lag });

/** A compute host's catalog dump as the test fakes it, by its agent's address. */
type DumpCatalog = (address: string, port: number) => Promise<PgSchemaDumpReply>;

async function backupHarness(probes: (host: string, port: number, isMaster: boolean) => Partial<MariaDbProbeReply>, { dumpCatalog, ...overrides }: Partial<BackupJobDeps> & { dumpCatalog?: DumpCatalog } = {}) {
  const h = await startHarness();
  const cluster = await h.readyCluster();
  await h.runner.stop();
  const storages = memoryStorages();
  const masterOf = (host: string, port: number) => Object.values(cluster.shards).some((s) => s.nodes[s.masterNodeId].hostaddr === host && s.nodes[s.masterNodeId].port === port);
  const dumps: string[] = [];
  const haCalls: string[] = [];
  const heldPos = { at: '0-1-42' };
  const dumpOn: DumpCatalog =
    dumpCatalog ??
    (async (address, port) => {
      dumps.push(`${address}/${port}`);
      return { dumps: [{ database: 'shop', dump: Buffer.from('PGDMP custom archive'), format: 'custom' }] };
    });
  const agents = {
    agentAddress: (host: string) => `${host}:${AGENT_PORT}`,
    mariadb: (host: string) => ({ probe: async (port: number) => ({ port, ...probes(host, port, masterOf(host, port)) }) }),
    catalogDump: (host: string) => ({ dumpPgSchema: (port: number) => dumpOn(`${host}:${AGENT_PORT}`, port) }),
    // A held standby reports one table at heldPos (the fake storage's backups are at 0-1-42).
    mariadbHa: (host: string) => ({
      tableChecksums: async (port: number, holdApply: boolean) => {
        haCalls.push(`hold ${host}:${port} ${holdApply}`);
        return { gtid_pos: heldPos.at, tables: [{ database: 'shop', table: 'orders', rows: 3, checksum: '4242' }], held: holdApply };
      },
      resumeApply: async (port: number) => {
        haCalls.push(`resume ${host}:${port}`);
        return { sql_running: true };
      },
    }),
  } as never;
  const deps: BackupJobDeps = {
    openStorage: storages.open,
    pvLimitMb: 20,
    maxReplicaDelayS: 30,
    appliedIndex: () => 1234,
    ...overrides,
  };
  const registry = registryOf({ manual_backup_cluster: manualBackupClusterJob(deps), create_backup_storage: createBackupStorageJob(storages.open), delete_backup_storage: deleteBackupStorage });
  const runner = new JobRunner(h.store, registry, stepServices(h.store, { agents }));
  const service = new ManagerService({ store: h.store, registry, queries: backupQueriesFor(), linearizableRead: async () => {}, secrets: testSecretBox(), onSubmitted: () => runner.notify() });
  runner.start();
  const run = async (jobType: string, paras: Record<string, unknown>) => {
    const { jobId } = await service.submitJob(request(jobType, paras));
    await until(() => ['done', 'failed'].includes(h.store.s.jobs[jobId].status), 5000);
    return { ...(await service.getStatus(jobId)), jobId };
  };
  const refusal = (jobType: string, paras: Record<string, unknown>) =>
    service.submitJob(request(jobType, paras)).then(
      () => undefined,
      (e: KcmError) => [e.errorName, e.message],
    );
  const storage = { name: 'local', stype: 'fs', hostaddr: '10.0.0.9', port: '58100', path: '/backups' };
  return { h, cluster, storages, run, refusal, runner, service, dumps, storage, haCalls, heldPos };
}

describe('create_backup_storage and delete_backup_storage', () => {
  it('registers a storage after opening it, lists it in get_backup_storage, and refuses a second one of the same name or place', async () => {
    const b = await backupHarness(() => standbyProbe(0));
    const created = await b.run('create_backup_storage', b.storage);
    expect(created.status, created.errorInfo).toBe('done');
    expect(created.attachment).toEqual({ name: 'local', stype: 'fs', hostaddr: '10.0.0.9', port: '58100', path: '/backups', free_bytes: '1000000000000', encryption: 'on' });
    const listed = { attachment: await b.service.runQuery(request("get_backup_storage", {})) };
    expect(listed.attachment).toMatchObject({ list_backup_storage: [{ hostaddr: '10.0.0.9', name: 'local', port: '58100', stype: 'fs', path: '/backups' }] });
    expect(await b.refusal('create_backup_storage', b.storage)).toEqual(['CONFLICT', expect.stringMatching(/^paras\.name: backup storage local already exists/)]);
    expect(await b.refusal('create_backup_storage', { ...b.storage, name: 'other' })).toEqual(['CONFLICT', expect.stringMatching(/^paras\.path: \/backups on 10\.0\.0\.9 is already backup storage local/)]);
    expect(await b.refusal('delete_backup_storage', { name: 'nope' })).toEqual(['NOT_FOUND', 'paras.name: backup storage nope does not exist']);
    await b.runner.stop();
  });

  it('refuses to delete a storage that holds a backup set, and deletes an empty one', async () => {
    const b = await backupHarness(() => standbyProbe(0));
    await b.run('create_backup_storage', b.storage);
    await b.run('create_backup_storage', { ...b.storage, name: 'spare', path: '/spare' });
    expect((await b.run('manual_backup_cluster', { cluster_id: b.cluster.id })).status).toBe('done');
    expect(await b.refusal('delete_backup_storage', { name: 'local' })).toEqual(['CONFLICT', expect.stringMatching(/still holds 1 backup set/)]);
    expect((await b.run('delete_backup_storage', { name: 'spare' })).status).toBe('done');
    expect(Object.keys(b.h.store.s.backupStorages)).toEqual(['local']);
    await b.runner.stop();
  });
});

describe('manual_backup_cluster', () => {
  it('is refused before anything is committed when no storage is registered or the cluster does not exist', async () => {
    const b = await backupHarness(() => standbyProbe(0));
    const jobs = b.h.jobCount();
    expect(await b.refusal('manual_backup_cluster', { cluster_id: b.cluster.id })).toEqual(['CONFLICT', expect.stringMatching(/no backup storage is registered/)]);
    await b.run('create_backup_storage', b.storage);
    expect(await b.refusal('manual_backup_cluster', { cluster_id: '99' })).toEqual(['NOT_FOUND', 'paras.cluster_id: cluster 99 does not exist']);
    expect(b.h.jobCount()).toBe(jobs + 1);
    await b.runner.stop();
  });

  it('backs up each shard from its least-lagging healthy standby at the configured MB/s, then the catalog, and records the set', async () => {
    // Per shard: the first standby lags 20 s, the second 3 s.
    const lagOf = new Map<string, number>();
    const b = await backupHarness((host, port, isMaster) => {
      if (isMaster) return { state: 'online', is_replica: false };
      const key = `${host}:${port}`;
      if (!lagOf.has(key)) lagOf.set(key, lagOf.size % 2 === 0 ? 20 : 3);
      return standbyProbe(lagOf.get(key)!);
    });
    await b.run('create_backup_storage', b.storage);
    const done = await b.run('manual_backup_cluster', { cluster_id: b.cluster.id });
    expect(done.status, done.errorInfo).toBe('done');
    const shards = Object.values(b.cluster.shards);
    expect(b.storages.pulls.map((p) => [p.key, p.pvLimitMb, p.source.is_master])).toEqual(
      shards.map((s) => [`cluster_${b.cluster.id}/backup_${done.jobId}/shard_${s.id}.mbstream`, 20, false]),
    );
    for (const pull of b.storages.pulls) {
      expect(lagOf.get(`${pull.source.hostaddr}:${pull.source.port}`)).toBe(3);
      expect(pull.opId).toMatch(new RegExp(`^job:${done.jobId}:backup:shard-\\d+$`));
    }
    expect(b.dumps).toHaveLength(1);
    const attachment = done.attachment as Record<string, any>;
    expect(attachment).toMatchObject({ backup_id: done.jobId, cluster_id: b.cluster.id, storage: 'local', list_catalog: [{ database: 'shop', location: `local:cluster_${b.cluster.id}/backup_${done.jobId}/catalog/shop.pgdump` }] });
    expect(b.h.store.s.backupSets[done.jobId].catalog).toMatchObject([{ database: 'shop', format: 'custom' }]);
    expect(attachment.list_shard).toHaveLength(2);
    expect(attachment.list_shard[0]).toMatchObject({ shard_id: shards[0].id, gtid_pos: '0-1-42', bytes: '5000', source_master: 'false', location: `local:cluster_${b.cluster.id}/backup_${done.jobId}/shard_${shards[0].id}.mbstream` });
    expect(attachment.backup_time).toMatch(/^\d{10}$/);
    const set = b.h.store.s.backupSets[done.jobId];
    expect(set).toMatchObject({ clusterId: b.cluster.id, storageName: 'local' });
    expect(newestFullBackupBefore(b.h.store.s, b.cluster.id, set.finishedAt)?.id).toBe(done.jobId);
    expect(newestFullBackupBefore(b.h.store.s, b.cluster.id, set.finishedAt - 1)).toBeUndefined();
    // Each standby source was held (checksummed at its position) and resumed after its backup;
    // the figures are recorded per shard because the backup's position is the held one.
    for (const pull of b.storages.pulls) {
      const at = `${pull.source.hostaddr}:${pull.source.port}`;
      expect(b.haCalls.indexOf(`hold ${at} true`)).toBeGreaterThanOrEqual(0);
      expect(b.haCalls.indexOf(`resume ${at}`)).toBeGreaterThan(b.haCalls.indexOf(`hold ${at} true`));
    }
    expect(set.shards.map((s) => s.tableChecksums)).toEqual(shards.map(() => [{ database: 'shop', table: 'orders', rows: 3, checksum: '4242' }]));
    await b.runner.stop();
  });

  it('records no table checksums when the backup is not at the held position, and still resumes the standby', async () => {
    const b = await backupHarness(() => standbyProbe(0));
    b.heldPos.at = '0-1-41';
    await b.run('create_backup_storage', b.storage);
    const done = await b.run('manual_backup_cluster', { cluster_id: b.cluster.id });
    expect(done.status, done.errorInfo).toBe('done');
    const shards = b.h.store.s.backupSets[done.jobId].shards;
    expect(shards.every((s) => s.tableChecksums === undefined)).toBe(true);
    expect(shards[0].checksumsOmitted).toBe("the backup's position 0-1-42 is not the held one 0-1-41");
    expect(b.haCalls.filter((c) => c.startsWith('resume'))).toHaveLength(b.storages.pulls.length);
    await b.runner.stop();
  });

  it('takes the master only when no standby qualifies, and fails naming the shard when nothing answers', async () => {
    let mastersDown = false;
    const b = await backupHarness((_h, _p, isMaster) => (isMaster ? (mastersDown ? { state: 'offline' } : { state: 'online' }) : standbyProbe(500)));
    await b.run('create_backup_storage', b.storage);
    const viaMaster = await b.run('manual_backup_cluster', { cluster_id: b.cluster.id });
    expect(viaMaster.status, viaMaster.errorInfo).toBe('done');
    expect(b.storages.pulls.every((p) => p.source.is_master)).toBe(true);
    // A master is never held: its set has no figures for a drill to compare.
    expect(b.haCalls.filter((c) => c.startsWith('hold'))).toEqual([]);
    expect(b.h.store.s.backupSets[viaMaster.jobId].shards.every((s) => s.tableChecksums === undefined && s.checksumsOmitted === undefined)).toBe(true);
    mastersDown = true;
    const failed = await b.run('manual_backup_cluster', { cluster_id: b.cluster.id });
    expect(failed.status).toBe('failed');
    expect(failed.errorInfo).toMatch(/shard_\d+: no node can be backed up \(standby .*: its lag 500 s is beyond 30 s; .*master .*: it is offline\)/);
    expect(b.h.store.s.backupSets[failed.jobId]).toBeUndefined();
    // What the failed backup stored is deleted, so no file in storage looks like a set.
    expect(b.storages.deletes).toEqual([`cluster_${b.cluster.id}/backup_${failed.jobId}/`]);
    // The rollback resumes applying on every standby (a hold a dead leader left).
    const standbys = Object.values(b.cluster.shards).flatMap((sh) => Object.values(sh.nodes).filter((n) => n.id !== sh.masterNodeId));
    for (const n of standbys) expect(b.haCalls).toContain(`resume ${n.hostaddr}:${n.port}`);
    await b.runner.stop();
  });

  it('with cluster_id -1 stores the metadata as one snapshot image at the applied index', async () => {
    const b = await backupHarness(() => standbyProbe(0));
    await b.run('create_backup_storage', b.storage);
    const done = await b.run('manual_backup_cluster', { cluster_id: '-1' });
    expect(done.status, done.errorInfo).toBe('done');
    const attachment = done.attachment as Record<string, any>;
    expect(attachment).toMatchObject({ backup_id: done.jobId, cluster_id: '-1', applied_index: '1234', location: `local:metadata/backup_${done.jobId}/metadata.json`, list_shard: [] });
    expect(b.storages.pulls).toEqual([]);
    const listed = { attachment: await b.service.runQuery(request("get_backup_storage", {})) };
    expect((listed.attachment as any).list_metadata_backup.map((s: any) => s.backup_id)).toEqual([done.jobId]);
    await b.runner.stop();
  });

  it('asks for the configured compression, records what the storage did, and dumps the catalog while the shards stream', async () => {
    const dumped: string[] = [];
    const b = await backupHarness((_h, _p, isMaster) => (isMaster ? { state: 'online', is_replica: false } : standbyProbe(1)), {
      compression: 'zstd',
      // Each side waits for the other: done only if the catalog is dumped while the streams run.
      dumpCatalog: async (address) => {
        await until(() => b.storages.pulls.length === 2, 4000);
        dumped.push(address);
        // An agent from before custom-format dumps: plain SQL, kept as .sql.
        return { dumps: [{ database: 'shop', dump: Buffer.from('CREATE SCHEMA s;'), format: '' }] };
      },
    });
    b.storages.hooks.duringPull = () => until(() => dumped.length === 1, 4000);
    await b.run('create_backup_storage', b.storage);
    const done = await b.run('manual_backup_cluster', { cluster_id: b.cluster.id });
    expect(done.status, done.errorInfo).toBe('done');
    expect(b.storages.pulls.map((p) => p.compression)).toEqual(['zstd', 'zstd']);
    const set = b.h.store.s.backupSets[done.jobId];
    expect(set.shards.map((s) => [s.compression, s.bytes, s.rawBytes])).toEqual([['zstd', 5000, 8000], ['zstd', 5000, 8000]]);
    expect(set.catalog.map((c) => [c.database, c.key.endsWith('/catalog/shop.sql'), c.format])).toEqual([['shop', true, undefined]]);
    await b.runner.stop();
  });

  it('encryption on (the default): each shard is sealed at its source with its own data key, wrapped by the storage\'s sealed KEK in the manifest and the set; off: in clear', async () => {
    const b = await backupHarness(() => standbyProbe(0));
    await b.run('create_backup_storage', b.storage);
    const encryption = b.h.store.s.backupStorages.local.encryption!;
    expect(encryption.keks).toHaveLength(1);
    expect(encryption.keks[0]).toMatchObject({ id: encryption.activeKekId, sealed: expect.stringMatching(/^kcm-sealed:v1:/) });
    const done = await b.run('manual_backup_cluster', { cluster_id: b.cluster.id });
    expect(done.status, done.errorInfo).toBe('done');
    const kek = openKek(testSecretBox(), encryption.keks[0].sealed);
    const set = b.h.store.s.backupSets[done.jobId];
    for (const [i, pull] of b.storages.pulls.entries()) {
      expect(pull.compression).toBe('zstd'); // a sealed stream's position comes from the source's end frame
      expect(pull.meta).toMatchObject({ enc: 'kcmseal1-aes-256-gcm', enc_kek_id: encryption.activeKekId });
      expect(set.shards[i].sealed).toEqual({ kekId: encryption.activeKekId, wrappedKey: pull.meta!.enc_wrapped_key });
      expect(unwrapDataKey(kek, encryption.activeKekId, pull.meta!.enc_wrapped_key).equals(pull.dataKey!)).toBe(true);
    }
    expect(b.storages.pulls[0].dataKey!.equals(b.storages.pulls[1].dataKey!)).toBe(false);

    await b.run('create_backup_storage', { ...b.storage, name: 'clear', path: '/clear', encryption: 'off' });
    expect(b.h.store.s.backupStorages.clear.encryption).toBeUndefined();
    await b.runner.stop();
  });
});

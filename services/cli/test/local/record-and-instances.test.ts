import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findInstances, instanceProcess, instanceRootOf, registryPidFiles } from '../../src/local/instances';
import { parseRecord, readRecord, recordPath, RecordError, RECORD_VERSION, writeRecord, type DeploymentRecord } from '../../src/local/record';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kcm-local-unit-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function sampleRecord(at: string): DeploymentRecord {
  return {
    version: RECORD_VERSION,
    dir: at,
    startedAt: '2026-01-01T00:00:00.000Z',
    managerNet: '127.0.1',
    agentNet: '127.0.2',
    first: 1,
    managers: [
      { index: 1, member: '127.0.1.1:58000', url: 'https://127.0.1.1:58000', pid: 101, argv: ['node', '--import', 'tsx', 'm.ts', '--config', `${at}/manager-1/config.json`], log: `${at}/manager-1/manager.log` },
    ],
    agents: [
      { index: 1, hostaddr: '127.0.2.1', port: 58100, stateDir: `${at}/agent-1/state`, machineFile: `${at}/agent-1/create_machine.json`, pid: 202, argv: ['node', 'a.ts'], log: `${at}/agent-1/agent.log` },
    ],
  };
}

describe('local.json', () => {
  it('reads back exactly what was written', async () => {
    const record = sampleRecord(path.join(dir, 'deployment'));
    await writeRecord(record);
    expect(await readRecord(record.dir)).toEqual(record);
    expect(JSON.parse(await readFile(recordPath(record.dir), 'utf8'))).toEqual(record);
  });

  it('is absent, not an error, where nothing was started', async () => {
    expect(await readRecord(path.join(dir, 'never-used'))).toBeUndefined();
  });

  it('refuses a file that is not JSON or not a record, naming the file and the field', () => {
    expect(() => parseRecord('{"version":1,', '/d/local.json')).toThrow(RecordError);
    expect(() => parseRecord('{"version":1,', '/d/local.json')).toThrow(/\/d\/local\.json is not JSON/);
    const noPid = sampleRecord('/d') as unknown as { managers: Array<Record<string, unknown>> };
    delete noPid.managers[0].pid;
    expect(() => parseRecord(JSON.stringify(noPid), '/d/local.json')).toThrow(/managers\.0\.pid/);
    expect(() => parseRecord(JSON.stringify({ ...sampleRecord('/d'), version: 99 }), '/d/local.json')).toThrow(/version/);
  });
});

describe('database instances found by pid file', () => {
  async function put(file: string, text: string): Promise<void> {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, text);
  }

  it('knows which directory each engine names on its command line', () => {
    expect(instanceRootOf('/k/storage_datadir/57001/run/mariadbd.pid')).toBe('/k/storage_datadir/57001');
    expect(instanceRootOf('/k/server_datadir/5432/postmaster.pid')).toBe('/k/server_datadir/5432');
    expect(instanceRootOf('/k/other/thing.pid')).toBe('/k/other');
  });

  it('finds pid files under the deployment directory and those the agent registries name elsewhere', async () => {
    const deployment = path.join(dir, 'deployment');
    const elsewhere = path.join(dir, 'elsewhere');
    const stateDir = path.join(deployment, 'agent-1', 'state');
    await put(path.join(deployment, 'agent-1/instances/storage_datadir/57001/run/mariadbd.pid'), '3001\n');
    await put(path.join(deployment, 'agent-1/instances/server_datadir/5432/postmaster.pid'), '3002\n/x\n1700000000\n5432\n');
    await put(path.join(deployment, 'agent-1/instances/storage_datadir/57002/run/mariadbd.pid'), 'garbage\n');
    // Placed outside the deployment directory by a create_machine with other paths:
    await put(path.join(stateDir, 'mariadb/57005.json'), JSON.stringify({ spec: { port: 57005, datadir: path.join(elsewhere, 'data'), logdir: path.join(elsewhere, 'log'), wal_log_dir: path.join(elsewhere, 'wal') } }));
    await put(path.join(elsewhere, 'data/57005/run/mariadbd.pid'), '3005\n');
    await put(path.join(stateDir, 'postgres/5433.json'), JSON.stringify({ port: 5433, datadir: path.join(elsewhere, 'pg/5433') }));
    await put(path.join(elsewhere, 'pg/5433/postmaster.pid'), '3006\n');
    await put(path.join(stateDir, 'postgres/not-a-port.json'), '{"datadir":"/etc"}');

    expect(await registryPidFiles(stateDir)).toEqual([path.join(elsewhere, 'data/57005/run/mariadbd.pid'), path.join(elsewhere, 'pg/5433/postmaster.pid')]);
    const found = await findInstances(deployment, [stateDir]);
    expect(found.map((i) => [i.pid, i.root]).sort()).toEqual(
      [
        [3001, path.join(deployment, 'agent-1/instances/storage_datadir/57001')],
        [3002, path.join(deployment, 'agent-1/instances/server_datadir/5432')],
        [3005, path.join(elsewhere, 'data/57005')],
        [3006, path.join(elsewhere, 'pg/5433')],
      ].sort(),
    );
  });

  it('treats a pid as the instance only while its argv names the instance directory', () => {
    const postgres = instanceProcess({ pidFile: '/k/server/5432/postmaster.pid', pid: 3002, root: '/k/server/5432' });
    expect(postgres.stopSignal).toBe('SIGINT');
    expect(postgres.isOurs(['/usr/lib/postgresql/15/bin/postgres', '-D', '/k/server/5432'])).toBe(true);
    expect(postgres.isOurs(['/usr/lib/postgresql/15/bin/postgres', '-D', '/k/server/5433'])).toBe(false);
    const mariadb = instanceProcess({ pidFile: '/k/storage/57001/run/mariadbd.pid', pid: 3001, root: '/k/storage/57001' });
    expect(mariadb.stopSignal).toBe('SIGTERM');
    expect(mariadb.isOurs(['/usr/sbin/mariadbd', '--defaults-file=/k/storage/57001/my.cnf'])).toBe(true);
    expect(mariadb.isOurs(['vim', 'notes.txt'])).toBe(false);
  });
});

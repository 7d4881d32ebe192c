// An install never reuses a data directory it did not create (issue 12, defect 2), on real
// engines: the leftover of an instance whose agent lost track of it (killed before it could
// record it, as a SIGKILL during create_cluster did) is moved aside by an install of another
// op, which says so; a running stranger is refused; a retry of the creating op continues.

import { mkdtemp, readdir, readFile, rm, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@kcm/common';
import { PostgresAgentClient } from '@kcm/agent-api';
import { startAgent, type RunningAgent } from '../../src/index';
import { MariaDbAgentClient } from '@kcm/agent-api';
import { killAll, pidsMentioning } from './processes';

const HOST = '127.0.2.1';
const PG_PORT = 56331;
const MARIADB_PORT = 56332;
const PASSWORD = 'app-Pw-0d9c1e7a';
const secrets = {
  admin: { user: 'kcm_agent', password: 'adm-Pw-41f0c2d8' },
  replication: { user: 'kcm_repl', password: 'repl-Pw-8e27b1c4' },
  storage: { user: 'kcm_storage', password: 'stor-Pw-c3a95e10' },
};

describe('an install does not reuse a data directory another op created (real postgres and mariadbd)', () => {
  let tmp: string;
  let agent: RunningAgent;
  let postgres: PostgresAgentClient;
  let mariadb: MariaDbAgentClient;
  const logLines: string[] = [];
  const stateDir = () => path.join(tmp, 'agent-state');
  const pgInstall = (opId: string, user: string) => postgres.install({ op_id: opId, comp_datadir: path.join(tmp, 'comp'), port: PG_PORT, user, password: PASSWORD, variables: {} });
  const mariadbSpec = () => ({
    port: MARIADB_PORT, datadir: path.join(tmp, 'data'), logdir: path.join(tmp, 'log'), wal_log_dir: path.join(tmp, 'wal'),
    server_id: 1, innodb_size_mb: 64, max_connections: 100, dbcfg: 1 as const, fullsync_level: 0,
  });
  const mariadbInstall = (opId: string) => mariadb.install({ op_id: opId, spec: mariadbSpec(), ...secrets, storage_db_patterns: [] });

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-reuse-'));
    await chmod(tmp, 0o755);
    const logger = createLogger({ name: 'agent', level: 'info', destination: new Writable({ write: (c, _e, done) => (logLines.push(String(c)), done()) }) });
    agent = await startAgent({ hostaddr: HOST, port: 0, logger, stateDir: stateDir() });
    postgres = new PostgresAgentClient(agent.address);
    mariadb = new MariaDbAgentClient(agent.address);
  }, 60_000);

  afterAll(async () => {
    await postgres?.remove('cleanup-pg', PG_PORT).catch(() => {});
    await mariadb?.remove('cleanup-mariadb', MARIADB_PORT).catch(() => {});
    postgres?.close();
    mariadb?.close();
    await agent?.stop();
    killAll(await pidsMentioning(tmp));
    await rm(tmp, { recursive: true, force: true });
  }, 120_000);

  it('postgres: a leftover data dir the agent has no record of is moved aside, and the new instance starts empty', async () => {
    await pgInstall('job:1:install:comp-1', 'first_user');
    const c = new pg.Client({ host: HOST, port: PG_PORT, user: 'first_user', password: PASSWORD, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    // A local marker: kcm_ddl carries a user's CREATE DATABASE and CREATE TABLE to the cluster's
    // shards, and this lone instance has none; a view stays on the node.
    await c.query('CREATE VIEW public.left_behind AS SELECT 1 AS marker');
    await c.end();
    // What an agent killed mid-install left: an initdb'd data dir, stopped, with no record.
    await postgres.stop('stop-1', PG_PORT);
    await rm(path.join(stateDir(), 'postgres', `${PG_PORT}.json`));

    const reply = await pgInstall('job:2:install:comp-2', 'second_user');
    expect(reply.detail).toMatch(new RegExp(`moved aside to ${path.join(tmp, 'comp', String(PG_PORT))}\\.set-aside-`));
    expect(await readdir(path.join(tmp, 'comp'))).toEqual(expect.arrayContaining([String(PG_PORT), expect.stringMatching(/\.set-aside-/)]));
    const d = new pg.Client({ host: HOST, port: PG_PORT, user: 'second_user', password: PASSWORD, database: 'postgres' });
    d.on('error', () => {});
    await d.connect();
    const found = await d.query("SELECT count(*)::int AS n FROM pg_class WHERE relname = 'left_behind'");
    const roles = await d.query("SELECT count(*)::int AS n FROM pg_roles WHERE rolname = 'first_user'");
    await d.end();
    expect({ relations: found.rows[0].n, roles: roles.rows[0].n }).toEqual({ relations: 0, roles: 0 });
    expect(logLines.some((l) => l.includes('moved it aside'))).toBe(true);
  }, 120_000);

  it('postgres: a running instance of another op is refused; the op that created it may retry', async () => {
    await expect(pgInstall('job:3:install:comp-3', 'third_user')).rejects.toThrow(/holds a running PostgreSQL .* that install job:3:install:comp-3 did not create; refusing/);
    const again = await pgInstall('job:2:install:comp-2', 'second_user');
    expect(again.running).toBe(true);
  }, 60_000);

  it('postgres: remove deletes the data dir of the instance it installed', async () => {
    await postgres.remove('remove-2', PG_PORT);
    expect((await readdir(path.join(tmp, 'comp'))).filter((e) => e === String(PG_PORT))).toEqual([]);
  }, 60_000);

  it('postgres: remove given the comp_datadir deletes a data dir the agent has no record of (the reported leftover)', async () => {
    await pgInstall('job:4:install:comp-4', 'fourth_user');
    await postgres.stop('stop-4', PG_PORT);
    await rm(path.join(stateDir(), 'postgres', `${PG_PORT}.json`));
    const reply = await postgres.remove('job:5:remove:comp-4', PG_PORT, path.join(tmp, 'comp'));
    expect(reply.detail).toBe('not registered; data directory removed');
    expect((await readdir(path.join(tmp, 'comp'))).filter((e) => e === String(PG_PORT))).toEqual([]);
  }, 60_000);

  it('mariadb: directories left by an instance of another op are moved aside, not reused', async () => {
    await mariadbInstall('job:1:install:node-1');
    const c = await mysql.createConnection({ host: HOST, port: MARIADB_PORT, user: secrets.storage.user, password: secrets.storage.password });
    await c.query('CREATE DATABASE `left_$$_behind`');
    await c.end();
    await mariadb.stop('stop-m1', MARIADB_PORT);

    const reply = await mariadbInstall('job:2:install:node-2');
    expect(reply.detail).toMatch(/moved aside to .*\.set-aside-/);
    const d = await mysql.createConnection({ host: HOST, port: MARIADB_PORT, user: secrets.storage.user, password: secrets.storage.password });
    const [rows] = (await d.query("SHOW DATABASES LIKE 'left%'")) as unknown as [unknown[]];
    await d.end();
    expect(rows).toEqual([]);
    expect(await readFile(path.join(tmp, 'data', String(MARIADB_PORT), '.kcm-created-by-op'), 'utf8')).toBe('job:2:install:node-2');
    await expect(mariadbInstall('job:3:install:node-3')).rejects.toThrow(/running mariadbd .* created by op job:2:install:node-2, not by install job:3:install:node-3; refusing/);
  }, 180_000);
});

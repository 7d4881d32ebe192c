// Restore a full backup from backup storage onto an installed instance (cluster_restore's
// first step on a destination shard master): read the mbstream objects back with the
// storage's Get into `mbstream -x` in a staging dir and prepare it while the instance
// still serves its old data; only a prepared copy replaces it. Then the copy's GTID
// position becomes the instance's, and the destination cluster's accounts replace the
// source's (a physical copy carries the source cluster's mysql.user).

import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { AgentContext } from '../../../capability';
import { exec, ExecError, spawnPiped } from '../../../ops/exec';
import type { MariaDbAccount, MariaDbInstanceSpec, MariaDbRestoreFullBackupReply, MariaDbRestoreFullBackupRequest } from '@kcm/agent-api';
import { CLUSTER_DATABASES_PATTERN, markInitialized, prepareInstanceFiles, STORAGE_PRIVILEGES, unmarkInitialized } from '../instance/install';
import { engineOf } from '../instance/engine';
import { checkAccount, checkSpec, chownTree, emptyDir, mariadbTools, mysqlUser, type InstanceLayout } from '../instance/instance-layout';
import { startInstance, stopInstance } from '../instance/lifecycle';
import { backupGtid } from '../backup/rebuild';
import { account, scrub, sqlString, withAdmin } from '../instance/sql';
import { closeBinlogDumps } from './binlog-dumps';
import { XA_DECISIONS_DDL, xaDecisionsGrant } from '../instance/xa';
import { checkStoredObject, readStoredObject } from './storage-objects';
import { withStorageNodeSpace } from '../instance/disk-needs';
import { checkCompression, spawnDecompressor } from '../backup/backup-compression';

const RESTORE_TIMEOUT_MS = 6 * 3600_000;
/** Account names kcm generates (jobs/credentials.ts): those of another cluster are dropped from a restored copy. */
const GENERATED_ACCOUNT = /^(kcm_admin|kcm_repl|storage|computer)_[0-9a-f]{8}$/;

export async function restoreFullBackup(ctx: AgentContext, req: MariaDbRestoreFullBackupRequest): Promise<MariaDbRestoreFullBackupReply> {
  const spec = checkSpec(req.spec);
  const accounts = { admin: checkAccount('admin', req.admin), replication: checkAccount('replication', req.replication), storage: checkAccount('storage', req.storage) };
  if (req.objects.length === 0) throw new Error('objects must name at least one stored object');
  const objects = req.objects.map((o, i) => checkStoredObject(o, `objects[${i}]`));
  // The backup is unpacked into the instance's directories: refused up front on a full
  // disk, and a failure the disk causes names it.
  return withStorageNodeSpace(ctx, spec, { precheck: true }, () => restoreInto(ctx, spec, accounts, objects));
}

async function restoreInto(
  ctx: AgentContext,
  spec: MariaDbInstanceSpec,
  accounts: { admin: MariaDbAccount; replication: MariaDbAccount; storage: MariaDbAccount },
  objects: ReturnType<typeof checkStoredObject>[],
): Promise<MariaDbRestoreFullBackupReply> {
  const layout = await prepareInstanceFiles(ctx, spec, accounts.admin);
  // The engine the restored instance runs: its own mariabackup and mbstream read the backup.
  const engine = await engineOf(ctx, spec.port);

  const staging = path.join(layout.instanceDir, 'restore');
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { mode: 0o700 });
  const started = Date.now();
  const bytes = await extractStoredStream(objects, staging, engine.mbstream);
  await exec(engine.backup, ['--prepare', `--target-dir=${staging}`], { timeoutMs: RESTORE_TIMEOUT_MS, cwd: layout.instanceDir });
  const gtid = await backupGtid(staging);
  ctx.logger.info({ port: spec.port, bytes, gtid, ms: Date.now() - started }, 'backup read back from storage and prepared');

  await stopInstance(ctx, layout);
  await unmarkInitialized(layout); // the supervisor must not start a half-swapped data dir
  for (const dir of [layout.dataDir, layout.redoDir, layout.binlogDir, layout.tmpDir]) await emptyDir(dir);
  await exec(engine.backup, [`--defaults-file=${layout.myCnf}`, '--move-back', `--target-dir=${staging}`], { timeoutMs: RESTORE_TIMEOUT_MS, cwd: layout.instanceDir });
  const mysql = mysqlUser();
  for (const dir of [layout.dataDir, layout.redoDir, layout.binlogDir]) await chownTree(dir, mysql);
  await rm(staging, { recursive: true, force: true });
  await markInitialized(layout);
  const running = await startInstance(ctx, layout);

  await setAccounts(layout, accounts);
  const secrets = [accounts.admin.password, accounts.replication.password, accounts.storage.password];
  await withAdmin(layout, accounts.admin, secrets, async (s) => {
    const users = await s.rows<{ User: string; Host: string }>('list accounts', 'SELECT User, Host FROM mysql.user');
    const ours = new Set([accounts.admin.user, accounts.replication.user, accounts.storage.user]);
    await s.run('keep account changes out of the binlog', 'SET SESSION sql_log_bin = 0');
    for (const u of users) if (GENERATED_ACCOUNT.test(u.User) && !ours.has(u.User)) await s.run(`drop the source cluster's account ${u.User}`, `DROP USER ${account(u.User, u.Host)}`);
    // The copy's position becomes the instance's own: replayed binlogs and new writes continue it.
    // No standby may be dumping this binlog meanwhile (see closeBinlogDumps).
    const unlock = await closeBinlogDumps(s, accounts.replication.user);
    await s.run('forget the old binlogs', 'RESET MASTER');
    if (gtid) await s.run('set gtid_binlog_state', 'SET GLOBAL gtid_binlog_state = ?', [gtid]);
    await s.run('set gtid_slave_pos', 'SET GLOBAL gtid_slave_pos = ?', [gtid]);
    await unlock();
  });
  ctx.logger.info({ port: spec.port, gtid, bytes, ms: Date.now() - started }, 'full backup restored');
  return { gtid_pos: gtid, bytes, pid: running.pid };
}

/**
 * Pipes the objects, in order, into `mbstream -x -C dir`; returns the bytes read. A set
 * stored compressed (every object says the same) goes through `zstd -d` first. (Its stdout
 * is relayed by this process: a child's stdout handed to another child as stdin is also
 * read by Node itself from the moment it exists, which would take bytes from mbstream.)
 */
async function extractStoredStream(objects: ReturnType<typeof checkStoredObject>[], dir: string, mbstream: string): Promise<number> {
  const compressions = new Set(objects.map((o, i) => checkCompression(o.compression, `objects[${i}].compression`)));
  if (compressions.size > 1) throw new Error('the objects of one backup stream must share one compression');
  const compressed = [...compressions][0] === 'zstd';
  const unzstd = compressed ? spawnDecompressor() : undefined;
  const extract = spawnPiped(mbstream, ['-x', '-C', dir], { input: 'pipe', output: 'ignore', timeoutMs: RESTORE_TIMEOUT_MS });
  const relayed = unzstd ? pipeline(unzstd.stdout, extract.stdin) : Promise.resolve();
  relayed.catch(() => {}); // a dead end is reported by its process's `done`
  const input = unzstd ? unzstd.stdin : extract.stdin;
  const died = (p: { done: Promise<string> }, what: string) => p.done.then(() => {
    throw new Error(`${what} exited before the stream ended`);
  });
  const eitherDied = Promise.race([died(extract, 'mbstream'), ...(unzstd ? [died(unzstd, 'zstd -d')] : [])]);
  eitherDied.catch(() => {});
  let bytes = 0;
  try {
    for (const obj of objects) {
      for await (const piece of readStoredObject(obj)) {
        bytes += piece.length;
        if (!input.write(piece)) await Promise.race([once(input, 'drain'), eitherDied]);
      }
    }
    input.end();
    await Promise.all([extract.done, ...(unzstd ? [unzstd.done, relayed] : [])]);
    return bytes;
  } catch (err) {
    unzstd?.kill();
    extract.kill();
    throw err;
  }
}

/**
 * The destination cluster's three accounts on the restored copy, made as root over the
 * socket (the copy's admin account is the source cluster's, with its password): the SQL
 * reaches the CLI on stdin, never argv.
 */
async function setAccounts(layout: InstanceLayout, accounts: { admin: MariaDbAccount; replication: MariaDbAccount; storage: MariaDbAccount }): Promise<void> {
  const user = (a: MariaDbAccount, host: string) => [
    `CREATE USER IF NOT EXISTS ${account(a.user, host)} IDENTIFIED BY ${sqlString(a.password)};`,
    `ALTER USER ${account(a.user, host)} IDENTIFIED BY ${sqlString(a.password)};`,
  ];
  const sql = [
    'SET SESSION sql_log_bin = 0;',
    ...user(accounts.admin, 'localhost'),
    `GRANT ALL PRIVILEGES ON *.* TO ${account(accounts.admin.user, 'localhost')} WITH GRANT OPTION;`,
    ...user(accounts.replication, '%'),
    `GRANT REPLICATION SLAVE, BINLOG MONITOR, SLAVE MONITOR ON *.* TO ${account(accounts.replication.user, '%')};`,
    ...user(accounts.storage, '%'),
    `GRANT ${STORAGE_PRIVILEGES} ON \`${CLUSTER_DATABASES_PATTERN}\`.* TO ${account(accounts.storage.user, '%')};`,
    // A copy of an instance installed before two-phase commit has no decision table yet.
    ...XA_DECISIONS_DDL.map((ddl) => `${ddl};`),
    `${xaDecisionsGrant(accounts.storage.user)};`,
    '',
  ].join('\n');
  try {
    await exec(mariadbTools.client, ['--no-defaults', `--socket=${layout.socket}`, '--user=root', '--batch'], { input: sql, timeoutMs: 30_000 });
  } catch (err) {
    if (err instanceof ExecError) throw new Error(`setting the destination's accounts failed: ${scrub(err.message, [accounts.admin.password, accounts.replication.password, accounts.storage.password])}`);
    throw err;
  }
}

// Rebuild a standby, or seed a new one (add_nodes), from a physical copy of a healthy
// member of its shard: choose the source, pull its mariabackup stream (at most pv_limit
// MB/s), keep or drop the old data (need_backup), prepare, move into place, start, and
// re-attach to the master from the copy's GTID position.

import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AgentContext } from '../../../capability';
import { exec } from '../../../ops/exec';
import { receiveBackup } from './backup-stream';
import { chooseBackupSource, type ProbedSource } from './choose-source';
import { markInitialized, prepareInstanceFiles, unmarkInitialized } from '../instance/install';
import { engineOf } from '../instance/engine';
import { checkAccount, checkPort, checkSpec, chownTree, emptyDir, moveContents, mysqlUser, type InstanceLayout } from '../instance/instance-layout';
import { startInstance, stopInstance } from '../instance/lifecycle';
import { AgentFailure, agentClient, callUnary, isGtidPosText, MariaDbAgentService, type MariaDbAccount, type MariaDbBackupSource, type MariaDbInstanceSpec, type MariaDbProbeReply, type MariaDbRebuildReply, type MariaDbRebuildRequest } from '@kcm/agent-api';
import { withStorageNodeSpace } from '../instance/disk-needs';
import { attachToMaster, checkMaster } from '../instance/replication';
import { applySemiSync, persistRole } from '../instance/semi-sync';
import { withAdmin } from '../instance/sql';

const AGENT_ADDRESS = /^[A-Za-z0-9.-]{1,255}:\d{1,5}$/;
const PREPARE_TIMEOUT_MS = 6 * 3600_000;

export async function rebuildStandby(ctx: AgentContext, req: MariaDbRebuildRequest): Promise<MariaDbRebuildReply> {
  const spec = checkSpec(req.spec);
  const admin = checkAccount('admin', req.admin);
  const master = checkMaster(req.master_host, req.master_port, req.replication);
  for (const s of req.sources) {
    if (!AGENT_ADDRESS.test(s.agent_address)) throw new AgentFailure('invalid_argument', `agent_address ${JSON.stringify(s.agent_address)} must be host:port`);
    checkPort(s.port);
    if (s.hostaddr === ctx.hostaddr && s.port === spec.port) throw new AgentFailure('invalid_argument', 'an instance cannot be rebuilt from itself');
  }
  const probed = await Promise.all(req.sources.map(async (source): Promise<ProbedSource> => ({ source, probe: await probeRemote(source) })));
  const source = chooseBackupSource(probed, { allowReplicaDelayS: req.allow_replica_delay_s, allowPullFromMaster: req.allow_pull_from_master });
  ctx.logger.info({ port: spec.port, source: `${source.hostaddr}:${source.port}`, pv_limit_mb: req.pv_limit_mb }, 'rebuilding standby');

  // The copy goes into the instance's directories: refused up front on a full disk, and a
  // failure the disk causes names it.
  return withStorageNodeSpace(ctx, spec, { precheck: true }, () => rebuildFrom(ctx, req, spec, admin, master, source));
}

async function rebuildFrom(
  ctx: AgentContext,
  req: MariaDbRebuildRequest,
  spec: MariaDbInstanceSpec,
  admin: MariaDbAccount,
  master: ReturnType<typeof checkMaster>,
  source: MariaDbBackupSource,
): Promise<MariaDbRebuildReply> {
  const layout = await prepareInstanceFiles(ctx, spec, admin);
  // The engine the instance is to run (its record now names it): its mariabackup prepares the copy.
  const engine = await engineOf(ctx, spec.port);
  await stopInstance(ctx, layout);
  const staging = path.join(layout.instanceDir, 'restore');
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { mode: 0o700 });
  const copy = await receiveBackup(source, req.pv_limit_mb, staging, engine.mbstream);
  ctx.logger.info({ port: spec.port, bytes: copy.bytes, wire_bytes: copy.wireBytes, compression: copy.compression, ms: copy.transferMs }, 'copy received');
  await exec(engine.backup, ['--prepare', `--target-dir=${staging}`], { timeoutMs: PREPARE_TIMEOUT_MS, cwd: layout.instanceDir });
  const gtid = await backupGtid(staging);
  ctx.logger.info({ port: spec.port, gtid }, 'copy prepared');

  await unmarkInitialized(layout);
  const kept = await setOldDataAside(layout, req.need_backup);
  await exec(engine.backup, [`--defaults-file=${layout.myCnf}`, '--move-back', `--target-dir=${staging}`], {
    timeoutMs: PREPARE_TIMEOUT_MS,
    cwd: layout.instanceDir,
  });
  const mysql = mysqlUser();
  for (const dir of [layout.dataDir, layout.redoDir, layout.binlogDir]) await chownTree(dir, mysql);
  await rm(staging, { recursive: true, force: true });
  await markInitialized(layout);
  ctx.logger.info({ port: spec.port }, 'copy moved into place');

  const started = await startInstance(ctx, layout);
  await withAdmin(layout, admin, [master.replication.password], async (s) => {
    await s.run('refuse client writes', 'SET GLOBAL read_only = ON');
    await applySemiSync(s, 'standby', spec.fullsync_level);
    await s.run('stop slave', 'STOP ALL SLAVES');
    await s.run('forget the copy source master', "RESET SLAVE '' ALL");
    await s.run('set gtid_slave_pos from the copy', 'SET GLOBAL gtid_slave_pos = ?', [gtid]);
    await attachToMaster(s, master);
  });
  await persistRole(layout, 'standby', spec.fullsync_level);
  ctx.logger.info({ port: spec.port, gtid, bytes: copy.bytes, ms: copy.transferMs, kept_old_data: kept }, 'standby rebuilt');
  return {
    source_hostaddr: source.hostaddr,
    source_port: source.port,
    gtid_pos: gtid,
    bytes: copy.bytes,
    transfer_ms: copy.transferMs,
    kept_old_data: kept,
    pid: started.pid,
  };
}

/** Asks a candidate's agent for its live status; an agent that does not answer makes it unsuitable. */
async function probeRemote(source: MariaDbBackupSource): Promise<MariaDbProbeReply | undefined> {
  const client = agentClient(MariaDbAgentService, source.agent_address);
  try {
    return await callUnary<MariaDbProbeReply>(client, source.agent_address, 'Probe', { port: source.port }, 5000);
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}

/**
 * The GTID position the copy is consistent with. mariabackup records the source's binlog
 * position; a standby source also writes its slave position (--slave-info), used when the
 * binlog one is missing.
 */
export async function backupGtid(backupDir: string): Promise<string> {
  const read = (name: string) => readFile(path.join(backupDir, name), 'utf8').catch(() => '');
  const binlogInfo = (await read('mariadb_backup_binlog_info')) || (await read('xtrabackup_binlog_info'));
  let gtid = binlogInfo.trim().split(/\s+/)[2] ?? '';
  if (!gtid) {
    const slaveInfo = (await read('mariadb_backup_slave_info')) || (await read('xtrabackup_slave_info'));
    gtid = /gtid_slave_pos\s*=\s*'([^']*)'/.exec(slaveInfo)?.[1] ?? '';
  }
  if (!isGtidPosText(gtid)) throw new AgentFailure('instance_failed', `backup GTID position ${JSON.stringify(gtid)} is not a GTID list`);
  return gtid;
}

/**
 * need_backup: move the old data, redo and binlogs aside with renames (instant, and each on
 * its own filesystem: datadir and wal_log_dir may be different disks); otherwise delete them.
 * Returns where the data went ('' when deleted); redo and binlogs go to the same name under
 * the instance's wal_log_dir.
 */
async function setOldDataAside(layout: InstanceLayout, keep: boolean): Promise<string> {
  let kept = '';
  if (keep) {
    const name = `pre-rebuild-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    kept = path.join(layout.instanceDir, name);
    await moveContents(layout.dataDir, path.join(kept, 'data'));
    await moveContents(layout.redoDir, path.join(layout.walDir, name, 'redo'));
    await moveContents(layout.binlogDir, path.join(layout.walDir, name, 'binlog'));
    await writeFile(path.join(kept, 'README'), `Data of this instance before a rebuild (need_backup); redo and binlogs are in ${path.join(layout.walDir, name)}.\n`);
  } else {
    for (const dir of [layout.dataDir, layout.redoDir, layout.binlogDir]) await emptyDir(dir);
  }
  await emptyDir(layout.tmpDir);
  return kept;
}

// npm run bench:backup -- [--size-mb N] [--source-apart] [--nodes N] [--pv-limit-mb N] [--baseline-s N] [--pause-ms N] [--in-process-agents] [--cpu-prof DIR] [--keep]
//
// Backup and restore on real engines, every figure from one run (run it under
// `flock /tmp/kcm-system.lock`: it uses the system tests' fixed loopback addresses and ports).
//
// Set-up: the cluster test fixture (test/cluster/cluster-fixture.ts): three agents on
// 127.0.2.1-3, each its own OS process as deployed (`--in-process-agents` runs them in this
// process, sharing one event loop with the manager and the client), a one-member manager
// in this process, an `fs` backup storage on host 3, and two
// clusters of 1 shard (`--nodes` per shard, 1 compute node): the source and the restore's
// empty destination. The source's shard is loaded with `--size-mb` MB of random rows
// straight on its master (server side, sequence engine), and a table `ticks` that a client
// inserts into through the compute node, one row at a time (`--pause-ms` between rows),
// from before the backup until the restore point. The backup starts once every standby
// has applied the load and the binlog archive holds it (the catch-up time is printed).
//
// What is measured, and how:
// - Backup throughput: manual_backup_cluster of the source (the manager's stream limit set
//   by `--pv-limit-mb`, 0 = none, so the pipeline itself is measured), as the shard's
//   backup bytes over (a) the stream's own transfer time the storage agent reports and
//   (b) the whole job, submit to done. Against it, on the same node the job chose, right
//   after it: the agent's mariabackup command line with its stdout written to a file and
//   fsynced (raw-backup.ts). Target: managed >= 0.9x raw. The raw copy also runs before the
//   job (on the standby listed first, to show any order effect), and after it once more
//   through zstd (the managed pipeline without the agents, to show the agents' share).
// - Write stall: the latencies of the compute-node inserts sent during the backup job
//   against those of the `--baseline-s` seconds before it (p50, p99, max).
// - Archive lag: kcm_binlog_archive_lag_seconds of the source cluster, scraped from the
//   manager's /metrics every 500 ms from the start of the write load to the restore point
//   (p50, p99, max of the samples). The gauge is a sawtooth: it grows until the archiver's
//   next round (binlogArchiveIntervalMs, 5 s) stores the newest binlog.
// - Restore time per GB: cluster_restore of the source into the destination at a time T
//   after the backup (the full backup restored, standbys rebuilt, binlogs replayed to T),
//   submit to done, over the backup set's bytes. The restored ticks are checked against
//   the source's rows before T.
// A figure whose piece fails prints "not measured: <why>" instead.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { archiveCoversUntil, shardArchive, type ClusterRecord } from '@kcm/manager';
import { computerPorts, HOSTS, startClusterFixture, storagePorts, waitUntil, type ClusterFixture } from '../../test/cluster/cluster-fixture';
import { clusterParas } from '../../test/cluster/cluster-paras';
import { emitRaw, waitForJobEnd } from '../../test/helpers/emit-client';
import { rawMariabackupToFile, scriptedOffHost } from './raw-backup';
import { ArchiveLagSampler, createTicksTable, DB, loadPayload, quantile, TickWriter, withComp, type Endpoint } from './workload';
import { openTestAccounts } from '../../test/helpers/secrets';

const { values: flags } = parseArgs({
  options: {
    'size-mb': { type: 'string', default: '200' },
    nodes: { type: 'string', default: '3' },
    'pv-limit-mb': { type: 'string', default: '0' },
    'baseline-s': { type: 'string', default: '10' },
    'pause-ms': { type: 'string', default: '5' },
    'in-process-agents': { type: 'boolean', default: false },
    // No node of the source shard on the storage's host: the copy always crosses the data plane.
    'source-apart': { type: 'boolean', default: false },
    // The storage's encryption at rest (docs/backup-encryption.md): on (the default) or off.
    encryption: { type: 'string', default: 'on' },
    keep: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const sizeMb = Number(flags['size-mb']);
const baselineS = Number(flags['baseline-s']);
const pauseMs = Number(flags['pause-ms']);
const pvLimitMb = Number(flags['pv-limit-mb']);
for (const [name, v] of [['size-mb', sizeMb], ['baseline-s', baselineS], ['pause-ms', pauseMs], ['pv-limit-mb', pvLimitMb], ['nodes', Number(flags.nodes)]] as const) {
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a number >= 0`);
}
if (flags.encryption !== 'on' && flags.encryption !== 'off') throw new Error('--encryption must be on or off');
if (flags.keep) process.env.KCM_TEST_KEEP_DIR = '1';
// Each process agent writes a V8 CPU profile into DIR when it exits on SIGTERM (below);
// the backup's window on the monotonic clock is printed, so profile-summary.ts can cut it out.
const cpuProfDir = flags['cpu-prof'] ? path.resolve(flags['cpu-prof']) : undefined;
if (cpuProfDir) process.env.KCM_TEST_NODE_ARGS = `${process.env.KCM_TEST_NODE_ARGS ?? ''} --cpu-prof --cpu-prof-dir=${cpuProfDir}`.trim();
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

const AGENT_PORT = 58185;
/** The scripted off-host pipeline's TLS listener on the storage host (beside the agents' fixed ports). */
const SCRIPTED_TLS_PORT = 58189;
const MEMBER = '127.0.1.78:58178';
const MB = 1024 * 1024;
const CLUSTER_PARAS = clusterParas({ nodes: flags.nodes, innodb_size: '128' });

const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const why = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 300);

let fixture: ClusterFixture | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\n${signal}: stopping agents, manager and engines\n`);
    void (fixture?.close() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

async function job(f: ClusterFixture, jobType: string, paras: Record<string, unknown>, timeoutMs: number) {
  const reply = await f.runJob(jobType, paras, timeoutMs);
  if (reply.status !== 'done') throw new Error(`${jobType} ended ${reply.status}: ${reply.error_info}`);
  return reply;
}

const onlyShard = (c: ClusterRecord) => Object.values(c.shards)[0];
const masterOf = (c: ClusterRecord): Endpoint => {
  const shard = onlyShard(c);
  const m = shard.nodes[shard.masterNodeId];
  return { host: m.hostaddr, port: m.port };
};
const compOf = (c: ClusterRecord): Endpoint => {
  const comp = Object.values(c.comps)[0];
  return { host: comp.hostaddr, port: comp.port };
};

/** Count and checksum of the ticks whose client stamp `at` lies in [fromMs, beforeMs). */
async function ticksIn(c: ClusterRecord, at: Endpoint, range: { fromMs?: number; beforeMs?: number } = {}): Promise<{ n: number; checksum: string }> {
  const conn = await mysql.createConnection({ host: at.host, port: at.port, ...openTestAccounts(c.accounts).storage, connectTimeout: 5000 });
  try {
    const bounds = [...(range.fromMs === undefined ? [] : [`at >= ${Number(range.fromMs)}`]), ...(range.beforeMs === undefined ? [] : [`at < ${Number(range.beforeMs)}`])];
    const where = bounds.length ? ` WHERE ${bounds.join(' AND ')}` : '';
    const [rows] = await conn.query(`SELECT COUNT(*) AS n, COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', id, at, v))), 0) AS checksum FROM \`${DB}\`.ticks${where}`);
    const r = (rows as { n: number; checksum: string | number }[])[0];
    return { n: Number(r.n), checksum: String(r.checksum) };
  } finally {
    await conn.end();
  }
}

/**
 * The restored ticks against the source as of T. A restore keeps the transactions whose
 * binlog time (the server's statement start, whole seconds) is before T; a tick carries the
 * client's clock from before it was sent, so one stamped in the last second before T may
 * have reached the server at T or later and rightly be absent. Exact below T - 1 s, nothing
 * at or after T, and the boundary second only a subset of the source's.
 */
async function restoredTicksCheck(src: ClusterRecord, dst: ClusterRecord, restoreTimeS: number): Promise<string> {
  const sure = (restoreTimeS - 1) * 1000;
  const [srcSure, dstSure, srcEdge, dstEdge, dstAfter] = await Promise.all([
    ticksIn(src, masterOf(src), { beforeMs: sure }),
    ticksIn(dst, masterOf(dst), { beforeMs: sure }),
    ticksIn(src, masterOf(src), { fromMs: sure, beforeMs: restoreTimeS * 1000 }),
    ticksIn(dst, masterOf(dst), { fromMs: sure, beforeMs: restoreTimeS * 1000 }),
    ticksIn(dst, masterOf(dst), { fromMs: restoreTimeS * 1000 }),
  ]);
  const problems = [
    ...(srcSure.n === dstSure.n && srcSure.checksum === dstSure.checksum ? [] : [`before T-1s source ${JSON.stringify(srcSure)}, restored ${JSON.stringify(dstSure)}`]),
    ...(dstAfter.n === 0 ? [] : [`${dstAfter.n} restored rows stamped at or after T`]),
    ...(dstEdge.n <= srcEdge.n ? [] : [`${dstEdge.n} restored rows in the second before T, the source has ${srcEdge.n}`]),
  ];
  if (problems.length) return `MISMATCH: ${problems.join('; ')}`;
  return `restored ticks match the source before T-1s (${dstSure.n} rows), none after T, ${dstEdge.n} of the ${srcEdge.n} stamped in the second before T (binlog time decides)`;
}

/** Waits until every standby of the only shard has applied the master's GTID position. */
async function standbysCaughtUp(c: ClusterRecord): Promise<void> {
  const shard = onlyShard(c);
  const gtidOf = async (n: Endpoint, variable: string) => {
    const conn = await mysql.createConnection({ host: n.host, port: n.port, ...openTestAccounts(c.accounts).storage, connectTimeout: 5000 });
    try {
      const [rows] = await conn.query(`SELECT @@${variable} AS g`);
      return String((rows as { g: string }[])[0].g);
    } finally {
      await conn.end();
    }
  };
  const target = await gtidOf(masterOf(c), 'gtid_binlog_pos');
  for (const node of Object.values(shard.nodes)) {
    if (node.id === shard.masterNodeId) continue;
    await waitUntil(`standby ${node.hostaddr}:${node.port} to apply ${target}`, async () => ((await gtidOf({ host: node.hostaddr, port: node.port }, 'gtid_slave_pos')) === target ? true : undefined), 600_000, 250);
  }
}

/** Submits cluster_restore, again while the archive does not reach T yet (the archiver runs every few seconds). */
async function submitRestore(paras: Record<string, unknown>): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ack = await emitRaw(MEMBER, 'cluster_restore', paras);
    if (ack.error_code === '0') return ack.job_id;
    if (!/beyond the archived binlogs/.test(ack.error_info) || Date.now() > deadline) throw new Error(`cluster_restore refused: ${ack.error_info}`);
    await sleep(500);
  }
}

/** user+system CPU seconds of each process agent (by host), from /proc/<pid>/stat; empty with in-process agents. */
async function agentCpuSeconds(f: ClusterFixture): Promise<Map<string, number>> {
  const ticks = 100; // USER_HZ on Linux
  const out = new Map<string, number>();
  for (const [host, agent] of f.processAgents) {
    const pid = await agent.listeningPid();
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields.length > 12) out.set(host, (Number(fields[11]) + Number(fields[12])) / ticks);
  }
  return out;
}

async function main(): Promise<void> {
  const f = await startClusterFixture({
    agentPort: AGENT_PORT, member: MEMBER, managerConfig: { backupPvLimitMb: pvLimitMb },
    processAgentHosts: flags['in-process-agents'] ? [] : [...HOSTS],
  });
  fixture = f;
  const figures: string[] = [];
  const writer: { w?: TickWriter } = {};
  const lag: { s?: ArchiveLagSampler } = {};
  try {
    log('registering machines and the backup storage');
    for (const [i, host] of HOSTS.entries()) {
      for (const [type, range] of [['storage', storagePorts(i)], ['computer', computerPorts(i)]] as const) {
        await job(f, 'create_machine', { hostaddr: host, machine_type: type, port_range: `${range.low}-${range.high}`, rack_id: 'r1', ...f.dirs(i), total_mem: '4096', total_cpu_cores: '2' }, 60_000);
      }
    }
    await job(f, 'create_backup_storage', { name: 'bench', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: path.join(f.tmp, 'backups'), encryption: flags.encryption }, 30_000);
    log(`creating the source and destination clusters (1 shard x ${flags.nodes} nodes, 1 compute node each)`);
    const [a, b] = await Promise.all([
      job(f, 'create_cluster', { ...CLUSTER_PARAS, nick_name: 'bench-source', computer_iplists: [HOSTS[0]], ...(flags['source-apart'] ? { storage_iplists: [HOSTS[0], HOSTS[1]] } : {}) }, 300_000),
      job(f, 'create_cluster', { ...CLUSTER_PARAS, nick_name: 'bench-restored', computer_iplists: [HOSTS[1]] }, 300_000),
    ]);
    const state = () => f.manager.store.state();
    const src = state().clusters[String(a.attachment!.cluster_id)];
    const dstId = String(b.attachment!.cluster_id);

    log(`loading ${sizeMb} MB of random rows on the source master`);
    const loadStarted = performance.now();
    let lastShown = 0;
    await loadPayload(masterOf(src), openTestAccounts(src.accounts).storage, sizeMb, (done) => {
      if (done - lastShown >= 50) log(`  ${(lastShown = done)} MB`);
    });
    const loadedAtS = Date.now() / 1000;
    log(`  loaded in ${fmt((performance.now() - loadStarted) / 1000)} s; waiting for the standbys and the binlog archive`);
    const catchUpFrom = performance.now();
    await standbysCaughtUp(src);
    const standbysS = (performance.now() - catchUpFrom) / 1000;
    await waitUntil('the binlog archive to hold the load', async () => {
      const archive = shardArchive(state(), src.id, onlyShard(src).id);
      return archive && archiveCoversUntil(archive) >= Math.floor(loadedAtS) - 1 ? true : undefined;
    }, 600_000, 500);
    figures.push(`after the load           standbys applied it in ${fmt(standbysS)} s; the binlog archive held it ${fmt((performance.now() - catchUpFrom) / 1000)} s after the load ended`);
    await createTicksTable(masterOf(src), openTestAccounts(src.accounts).storage);
    await waitUntil('ticks on the source compute node', () => withComp(compOf(src), openTestAccounts(src.accounts).computer, async (c) => {
      const { rows } = await c.query(`SELECT count(*)::int AS n FROM information_schema.foreign_tables WHERE foreign_table_schema = 'public' AND foreign_table_name = 'ticks'`);
      return rows[0].n === 1 ? true : undefined;
    }), 30_000);

    log(`write load through the compute node; ${baselineS} s of baseline`);
    writer.w = new TickWriter(compOf(src), openTestAccounts(src.accounts).computer, pauseMs);
    writer.w.start();
    lag.s = new ArchiveLagSampler(MEMBER, src.id, 500);
    lag.s.start();
    const baselineFrom = performance.now();
    const agentCpuIdleFrom = await agentCpuSeconds(f);
    await sleep(baselineS * 1000);

    // The raw copy both before and after the job (of the standby the job picks first, see
    // choose-source.ts): the first read of a node's files may pay for what the second finds cached.
    const nowShard = onlyShard(state().clusters[src.id]);
    const firstStandby = Object.values(nowShard.nodes).find((n) => n.id !== nowShard.masterNodeId)!;
    log(`raw mariabackup of ${firstStandby.hostaddr}:${firstStandby.port} to a file, before the job`);
    const rawBefore = await rawMariabackupToFile(firstStandby, path.join(f.tmp, 'raw-backup.mbstream')).catch((err: unknown) => why(err));

    log('manual_backup_cluster of the source');
    const backupWindowFromUs = monotonicUs();
    const agentCpuBefore = await agentCpuSeconds(f);
    const backupFrom = performance.now();
    await job(f, 'manual_backup_cluster', { cluster_id: src.id }, 1_800_000);
    const backupTo = performance.now();
    const backupWindowToUs = monotonicUs();
    const agentCpuAfter = await agentCpuSeconds(f);
    const set = Object.values(state().backupSets).find((s) => s.clusterId === src.id)!;
    const shardBackup = set.shards[0];
    // Throughput counts the same logical bytes on both sides: the mbstream mariabackup wrote
    // (before compression), against the raw copy's file of that same stream.
    const backupBytes = Number(shardBackup.rawBytes ?? shardBackup.bytes);
    const storedBytes = Number(shardBackup.bytes);
    const jobS = (backupTo - backupFrom) / 1000;
    const streamS = shardBackup.transferMs / 1000;
    const managedJobMbS = backupBytes / MB / jobS;
    const managedStreamMbS = backupBytes / MB / streamS;

    // Write stall: before vs during, from the same client and the same run.
    const before = writer.w.between(baselineFrom, backupFrom);
    const during = writer.w.between(backupFrom, backupTo);
    const stall = (xs: number[]) => `n=${xs.length} p50=${fmt(quantile(xs, 0.5), 2)} ms p99=${fmt(quantile(xs, 0.99), 2)} ms max=${fmt(Math.max(...xs), 2)} ms`;

    log(`raw mariabackup of the same node (${shardBackup.sourceHostaddr}:${shardBackup.sourcePort}) to a file, after the job`);
    const node = Object.values(onlyShard(state().clusters[src.id]).nodes).find((n) => n.hostaddr === shardBackup.sourceHostaddr && n.port === shardBackup.sourcePort)!;
    let raw: { bytes: number; ms: number } | string;
    try {
      raw = await rawMariabackupToFile(node, path.join(f.tmp, 'raw-backup.mbstream'));
    } catch (err) {
      raw = why(err);
    }

    log('raw mariabackup | zstd | file of the same node');
    const rawZstd = await rawMariabackupToFile(node, path.join(f.tmp, 'raw-backup.mbstream.zst'), true).catch((err: unknown) => why(err));
    log(`scripted off-host: mariabackup | zstd | TLS socket (socat) | file on the storage host ${HOSTS[2]}`);
    const offHost = await scriptedOffHost(node, HOSTS[2], SCRIPTED_TLS_PORT, f.tmp).catch((err: unknown) => why(err));

    figures.push(`backup set: ${fmt(backupBytes / MB)} MB mbstream of shard ${shardBackup.shardId}, stored ${shardBackup.compression ?? 'uncompressed'} as ${fmt(storedBytes / MB)} MB (ratio ${fmt(storedBytes / backupBytes, 2)})`);
    figures.push(`  taken from ${shardBackup.sourceWasMaster ? 'the master' : 'a standby'} ${shardBackup.sourceHostaddr}:${shardBackup.sourcePort}, stream limit ${pvLimitMb === 0 ? 'none' : `${pvLimitMb} MB/s`}`);
    if (typeof raw === 'string') {
      figures.push(`backup throughput: manual_backup_cluster ${fmt(managedJobMbS)} MB/s (job) ${fmt(managedStreamMbS)} MB/s (stream); raw mariabackup: not measured: ${raw}`);
    } else {
      const rawMbS = raw.bytes / MB / (raw.ms / 1000);
      figures.push(`backup throughput        manual_backup_cluster job ${fmt(managedJobMbS)} MB/s (${fmt(jobS)} s)   its stream ${fmt(managedStreamMbS)} MB/s (${fmt(streamS)} s)   raw mariabackup|file ${fmt(rawMbS)} MB/s (${fmt(raw.bytes / MB)} MB in ${fmt(raw.ms / 1000)} s)`);
      figures.push(`  managed / raw          job ${fmt(managedJobMbS / rawMbS, 2)}x   stream ${fmt(managedStreamMbS / rawMbS, 2)}x   (target >= 0.9x)`);
    }
    const sameNode = firstStandby.hostaddr === shardBackup.sourceHostaddr && firstStandby.port === shardBackup.sourcePort;
    if (typeof rawBefore === 'string') figures.push(`  raw copy before the job: not measured: ${rawBefore}`);
    else {
      const beforeMbS = rawBefore.bytes / MB / (rawBefore.ms / 1000);
      figures.push(`  raw copy before the job ${fmt(beforeMbS)} MB/s (${fmt(rawBefore.bytes / MB)} MB in ${fmt(rawBefore.ms / 1000)} s, ${sameNode ? 'the same node' : `another node, ${firstStandby.hostaddr}:${firstStandby.port}`})   job / that ${fmt(managedJobMbS / beforeMbS, 2)}x   stream / that ${fmt(managedStreamMbS / beforeMbS, 2)}x`);
    }
    // The baseline of issue 33: what a user would script for an off-host backup, and the local floor.
    const encrypted = shardBackup.sealed ? 'on' : 'off';
    if (typeof offHost === 'string') figures.push(`  scripted off-host mariabackup|zstd|TLS|file: not measured: ${offHost}`);
    else {
      const oMbS = offHost.bytes / MB / (offHost.ms / 1000);
      figures.push(`  job / scripted off-host (mariabackup|zstd --fast=1|socat TLS|file on ${HOSTS[2]}, ${fmt(oMbS)} MB/s, ${fmt(offHost.bytes / MB)} MB in ${fmt(offHost.ms / 1000)} s)   job ${fmt(managedJobMbS / oMbS, 2)}x   stream ${fmt(managedStreamMbS / oMbS, 2)}x   encryption ${encrypted}   (target >= 0.9x with encryption on)`);
    }
    if (typeof rawZstd === 'string') figures.push(`  raw mariabackup|zstd|file: not measured: ${rawZstd}`);
    else {
      const zMbS = rawZstd.bytes / MB / (rawZstd.ms / 1000);
      figures.push(`  job / local zstd: raw mariabackup|zstd|file (the local floor, after the job) ${fmt(zMbS)} MB/s (${fmt(rawZstd.bytes / MB)} MB in ${fmt(rawZstd.ms / 1000)} s)   job / that ${fmt(managedJobMbS / zMbS, 2)}x   stream / that ${fmt(managedStreamMbS / zMbS, 2)}x`);
    }
    if (cpuProfDir) figures.push(`  cpu profiles in ${cpuProfDir}; the job on the monotonic clock: ${backupWindowFromUs}-${backupWindowToUs} us (npx tsx bench/backup/profile-summary.ts <file.cpuprofile> ${backupWindowFromUs} ${backupWindowToUs}); agent pids ${(await Promise.all([...f.processAgents].map(async ([host, a]) => `${host}=${await a.listeningPid()}`))).join(' ')}`);
    if (agentCpuBefore.size > 0) {
      const used = (host: string) => (agentCpuAfter.get(host) ?? NaN) - (agentCpuBefore.get(host) ?? NaN);
      const perGb = (host: string) => used(host) / (backupBytes / 1e9);
      figures.push(`agent CPU during the job   source agent ${shardBackup.sourceHostaddr} ${fmt(used(shardBackup.sourceHostaddr), 2)} s (${fmt(perGb(shardBackup.sourceHostaddr), 2)} s/GB)   storage agent ${HOSTS[2]} ${fmt(used(HOSTS[2]), 2)} s (${fmt(perGb(HOSTS[2]), 2)} s/GB)   (user+system from /proc)`);
      // What the agents spend anyway (probes, the archiver, the write load's traffic), per second of the baseline: part of the figures above.
      const idleRate = (host: string) => ((agentCpuBefore.get(host) ?? NaN) - (agentCpuIdleFrom.get(host) ?? NaN)) / ((backupFrom - baselineFrom) / 1000);
      const piped = f.processAgents.get(shardBackup.sourceHostaddr)?.logLines().some((l) => l.msg === 'streaming backup over the data plane' && l.piped === true);
      const streamed = f.processAgents.get(shardBackup.sourceHostaddr)?.logLines().find((l) => l.msg === 'compressed backup streamed over the data plane');
      if (streamed) figures.push(`  source agent's stream: ${String(streamed.ms)} ms in all, the backup tool exited at ${String(streamed.backup_tool_ms)} ms, waited ${String(streamed.send_wait_ms)} ms for the receiver`);
      const stored = f.processAgents.get(HOSTS[2])?.logLines().find((l) => l.msg === 'backup stored');
      if (stored) figures.push(`  storage agent's transfer: ${String(stored.ms)} ms in all, first byte at ${String(stored.first_byte_ms)} ms, last byte at ${String(stored.last_byte_ms)} ms, fsync and manifest from ${String(stored.commit_start_ms)} ms`);
      figures.push(`  the same agents idle in the baseline: source ${fmt(idleRate(shardBackup.sourceHostaddr), 3)} s/s, storage ${fmt(idleRate(HOSTS[2]), 3)} s/s (x ${fmt(jobS)} s of job)   source piped mariabackup into zstd: ${piped ? 'yes' : 'no'}`);
    }
    // The job's wall time beyond the stream: its steps as the manager logged them.
    const steps = f.logLines.map((l) => { try { return JSON.parse(l) as { msg?: string; jobId?: string; step?: string; durationMs?: number }; } catch { return {}; } })
      .filter((l) => l.msg === 'step done' && l.jobId === set.id && l.durationMs !== undefined);
    if (steps.length) figures.push(`  job steps (manager log): ${steps.map((l) => `${l.step} ${l.durationMs} ms`).join(', ')}; job ${fmt(jobS * 1000, 0)} ms, stream ${shardBackup.transferMs} ms`);
    figures.push(`write stall (compute-node inserts)   before backup ${stall(before)}   during backup ${stall(during)}`);

    // Writes after the backup, then the restore point T, then writes after T.
    await sleep(3000);
    const restoreTime = Math.floor(Date.now() / 1000) + 1;
    await sleep(restoreTime * 1000 + 1500 - Date.now());
    await writer.w.stop();
    if (writer.w.error) figures.push(`  (the insert client stopped early: ${why(writer.w.error)})`);
    log(`restore point T=${restoreTime}; waiting for the archive to reach it`);

    let restoreJobId: string | Error;
    try {
      restoreJobId = await submitRestore({ src_cluster_id: src.id, dst_cluster_id: dstId, restore_time: String(restoreTime) });
    } catch (err) {
      restoreJobId = err instanceof Error ? err : new Error(String(err));
    } finally {
      lag.s.stop();
    }
    const lags = lag.s.samples.map((s) => s.lag);
    const lagFigure = (xs: number[]) => `n=${xs.length} p50=${fmt(quantile(xs, 0.5))} s p99=${fmt(quantile(xs, 0.99))} s max=${fmt(Math.max(...xs))} s`;
    figures.push(lags.length === 0
      ? `archive lag: not measured: no kcm_binlog_archive_lag_seconds sample for cluster ${src.id}${lag.s.lastError ? ` (${lag.s.lastError})` : ''}`
      : `archive lag (kcm_binlog_archive_lag_seconds every 500 ms under write load)   all ${lagFigure(lags)}   before backup ${lagFigure(lag.s.between(baselineFrom, backupFrom))}   during backup ${lagFigure(lag.s.between(backupFrom, backupTo))}`);
    const archiveProblems = new Set(f.logLines.filter((l) => l.includes('binlog archiving failed')).map((l) => /"problem":"((?:[^"\\]|\\.)*)"/.exec(l)?.[1] ?? l));
    for (const problem of archiveProblems) figures.push(`  archiver problem seen: ${problem.slice(0, 200)}`);

    log('cluster_restore into the destination');
    const restoreFrom = performance.now();
    const restoreReply = typeof restoreJobId === 'string' ? await waitForJobEnd([MEMBER], restoreJobId, 3_600_000) : undefined;
    const restoreS = (performance.now() - restoreFrom) / 1000;
    if (!restoreReply) {
      figures.push(`restore time per GB: not measured: ${why(restoreJobId)}`);
    } else if (restoreReply.status !== 'done') {
      figures.push(`restore time per GB: not measured: cluster_restore ended ${restoreReply.status}: ${restoreReply.error_info}`);
    } else {
      const dst = state().clusters[dstId];
      const check = await restoredTicksCheck(src, dst, restoreTime);
      const list = (restoreReply.attachment as { list_shard?: { binlogs?: string }[] } | undefined)?.list_shard ?? [];
      figures.push(`restore                  cluster_restore ${fmt(restoreS)} s for ${fmt(backupBytes / MB)} MB backup (${fmt(storedBytes / MB)} MB stored) + ${list.map((s) => s.binlogs ?? '?').join('+')} binlog file(s): ${fmt(restoreS / (backupBytes / 1e9))} s per GB   ${check}`);
    }
  } catch (err) {
    figures.push(`run stopped: ${why(err)}`);
    process.exitCode = 1;
  } finally {
    lag.s?.stop();
    await writer.w?.stop().catch(() => {});
    log('stopping agents, manager and engines');
    // SIGTERM first when profiling: an agent writes its profile only on a clean exit.
    if (cpuProfDir) await Promise.all([...f.processAgents.values()].map((a) => Promise.race([a.signal('SIGTERM'), sleep(15_000)])));
    await f.close();
  }
  process.stdout.write(`\nbench:backup  size-mb=${sizeMb} nodes=${flags.nodes} pv-limit-mb=${pvLimitMb} baseline-s=${baselineS} pause-ms=${pauseMs}\n${figures.join('\n')}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:backup failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

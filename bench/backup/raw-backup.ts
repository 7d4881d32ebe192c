// The reference bench/backup compares manual_backup_cluster against: the same mariabackup
// command line the agent runs (StreamBackup in services/agent/src/capabilities/mariadb/backup/
// backup-stream.ts), its stdout written straight to a file on disk and fsynced, with no
// gRPC hop, no rate limit and no checksum.

import { spawn } from 'node:child_process';
import { open, rm, stat } from 'node:fs/promises';
import { instanceLayout, rawBytesOfZstdSummary, systemMariaDbEngine, zstdTool } from '@kcm/agent';

export interface NodeDirs {
  port: number;
  datadir: string;
  logdir: string;
  walLogDir: string;
}

export interface RawBackup {
  bytes: number;
  ms: number;
}

/**
 * The raw copy; with `throughZstd`, mariabackup's stdout goes into `zstd --fast=1 -T2` (the
 * agent's arguments, backup-compression.ts) and zstd's into the file: the managed pipeline's
 * processes without the agents, to tell the agents' share of the gap from the pipe and zstd's.
 * `bytes` is always mariabackup's (zstd's input).
 */
export async function rawMariabackupToFile(node: NodeDirs, file: string, throughZstd = false): Promise<RawBackup> {
  const layout = instanceLayout({ port: node.port, datadir: node.datadir, logdir: node.logdir, wal_log_dir: node.walLogDir });
  const out = await open(file, 'w');
  const started = performance.now();
  try {
    const zstd = throughZstd ? spawn(zstdTool, ['--fast=1', '-T2', '-c', '-vv', '--no-progress'], { stdio: ['pipe', out.fd, 'pipe'] }) : undefined;
    let zstdLog = '';
    zstd?.stderr!.on('data', (d: Buffer) => (zstdLog += d.toString()));
    const zstdExit = zstd ? new Promise<number | null>((resolve) => zstd.on('close', resolve)) : Promise.resolve(0);
    const child = spawn(
      // The system's build: the bench's instances run the agent's default, the system-installed version.
      systemMariaDbEngine().backup,
      [`--defaults-file=${layout.myCnf}`, '--backup', '--stream=mbstream', `--target-dir=${layout.tmpDir}`, '--user=root', `--socket=${layout.socket}`, '--slave-info'],
      { stdio: ['ignore', zstd ? zstd.stdin! : out.fd, 'pipe'], cwd: layout.instanceDir },
    );
    zstd?.stdin!.destroy();
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    if (code !== 0) throw new Error(`mariabackup exited ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
    if ((await zstdExit) !== 0) throw new Error(`zstd failed: ${zstdLog.slice(-300)}`);
    await out.sync();
    const ms = performance.now() - started;
    return { bytes: zstd ? rawBytesOfZstdSummary(zstdLog) ?? NaN : (await stat(file)).size, ms };
  } finally {
    await out.close();
    await rm(file, { force: true });
  }
}

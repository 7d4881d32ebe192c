// The reference bench/backup compares manual_backup_cluster against: the same mariabackup
// command line the agent runs (StreamBackup in services/agent/src/capabilities/mariadb/backup/
// backup-stream.ts), its stdout written straight to a file on disk and fsynced, with no
// gRPC hop, no rate limit and no checksum.

import { spawn } from 'node:child_process';
import { open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
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

/**
 * What a user would script for an off-host backup (issue 33): `mariabackup --stream | zstd
 * --fast=1 -T2 | socat - OPENSSL:<storage host>` into `socat OPENSSL-LISTEN ... CREATE:<file>`
 * on the storage host, the file fsynced at the end. TLS with a throwaway self-signed
 * certificate (made in `dir`), no verification: the cipher work of a TLS hop, nothing more.
 * `bytes` is mariabackup's (zstd's input), as for the other copies.
 */
export async function scriptedOffHost(node: NodeDirs, storageHost: string, tlsPort: number, dir: string): Promise<RawBackup> {
  const layout = instanceLayout({ port: node.port, datadir: node.datadir, logdir: node.logdir, wal_log_dir: node.walLogDir });
  const pem = path.join(dir, 'bench-tls.pem');
  const file = path.join(dir, 'scripted-off-host.mbstream.zst');
  await exited(spawn('/usr/bin/openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${pem}.key`, '-out', `${pem}.crt`, '-days', '1', '-subj', '/CN=bench'], { stdio: 'ignore' }), 'openssl req');
  await writeFile(pem, Buffer.concat([await readFile(`${pem}.key`), await readFile(`${pem}.crt`)]), { mode: 0o600 });
  const receiver = spawn('/usr/bin/socat', ['-u', `OPENSSL-LISTEN:${tlsPort},bind=${storageHost},reuseaddr,cert=${pem},verify=0`, `CREATE:${file}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  const received = exited(receiver, 'socat (receiver)');
  await new Promise((r) => setTimeout(r, 300)); // the listener is up
  const started = performance.now();
  try {
    const sender = spawn('/usr/bin/socat', ['-u', 'STDIN', `OPENSSL:${storageHost}:${tlsPort},verify=0`], { stdio: ['pipe', 'ignore', 'pipe'] });
    const zstd = spawn(zstdTool, ['--fast=1', '-T2', '-c', '-vv', '--no-progress'], { stdio: ['pipe', sender.stdin!, 'pipe'] });
    sender.stdin!.destroy();
    let zstdLog = '';
    zstd.stderr!.on('data', (d: Buffer) => (zstdLog += d.toString()));
    const backup = spawn(
      systemMariaDbEngine().backup,
      [`--defaults-file=${layout.myCnf}`, '--backup', '--stream=mbstream', `--target-dir=${layout.tmpDir}`, '--user=root', `--socket=${layout.socket}`, '--slave-info'],
      { stdio: ['ignore', zstd.stdin!, 'ignore'], cwd: layout.instanceDir },
    );
    zstd.stdin!.destroy();
    await Promise.all([exited(backup, 'mariabackup'), exited(zstd, 'zstd'), exited(sender, 'socat (sender)'), received]);
    const out = await open(file, 'r');
    try {
      await out.sync();
    } finally {
      await out.close();
    }
    return { bytes: rawBytesOfZstdSummary(zstdLog) ?? NaN, ms: performance.now() - started };
  } finally {
    receiver.kill();
    await rm(file, { force: true });
  }
}

function exited(child: ReturnType<typeof spawn>, what: string): Promise<void> {
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-1000)));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${what} exited ${code}: ${stderr.trim().split('\n').slice(-2).join(' | ')}`))));
  });
}

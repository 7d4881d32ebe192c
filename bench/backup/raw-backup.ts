// The reference bench/backup compares manual_backup_cluster against: the same mariabackup
// command line the agent runs (StreamBackup in services/agent/src/capabilities/mariadb/
// backup-stream.ts), its stdout written straight to a file on disk and fsynced, with no
// gRPC hop, no rate limit and no checksum.

import { spawn } from 'node:child_process';
import { open, rm, stat } from 'node:fs/promises';
import { instanceLayout, mariadbTools } from '../../services/agent/src/capabilities/mariadb/instance-layout';

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

export async function rawMariabackupToFile(node: NodeDirs, file: string): Promise<RawBackup> {
  const layout = instanceLayout({ port: node.port, datadir: node.datadir, logdir: node.logdir, wal_log_dir: node.walLogDir });
  const out = await open(file, 'w');
  const started = performance.now();
  try {
    const child = spawn(
      mariadbTools.backup,
      [`--defaults-file=${layout.myCnf}`, '--backup', '--stream=mbstream', `--target-dir=${layout.tmpDir}`, '--user=root', `--socket=${layout.socket}`, '--slave-info'],
      { stdio: ['ignore', out.fd, 'pipe'], cwd: layout.instanceDir },
    );
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    if (code !== 0) throw new Error(`mariabackup exited ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
    await out.sync();
    const ms = performance.now() - started;
    return { bytes: (await stat(file)).size, ms };
  } finally {
    await out.close();
    await rm(file, { force: true });
  }
}

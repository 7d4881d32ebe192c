// Database instances the local agents started (mariadbd, postgres), found through pid
// files, so `kcm local down` stops them too. Two sources, merged:
//   1. every `*.pid` file under the deployment directory (postgres's postmaster.pid, mariadbd's
//      run/mariadbd.pid): instances whose directories were put under it, as the create_machine
//      files `kcm local up` writes do;
//   2. the agents' own registries (<stateDir>/mariadb/<port>.json, <stateDir>/postgres/<port>.json):
//      instances placed anywhere else.
// A pid from a pid file is signalled only while its process's argv names that instance's
// directory (see instanceRootOf), so a stale pid file never kills another program.

import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { instanceLayout } from '../../../agent/src/capabilities/mariadb/instance/instance-layout';
import { argvMentionsDir, parsePidFile, type OwnedProcess } from './processes';

export interface InstancePidFile {
  pidFile: string;
  pid: number;
  /** The directory the instance's argv must name for the pid to count as this instance. */
  root: string;
}

/** How deep under the deployment directory pid files are looked for (instance dirs sit about 6 levels down). */
const MAX_SCAN_DEPTH = 10;

/**
 * The instance directory a pid file belongs to: postgres's data directory holds
 * postmaster.pid and is named by `-D`; mariadbd's pid file sits in <instance>/run and its
 * argv names <instance>/my.cnf. Anything else: the pid file's own directory.
 */
export function instanceRootOf(pidFile: string): string {
  const dir = path.dirname(pidFile);
  if (path.basename(pidFile) !== 'postmaster.pid' && path.basename(dir) === 'run') return path.dirname(dir);
  return dir;
}

export function isPidFileName(name: string): boolean {
  return name.endsWith('.pid');
}

/** Every `*.pid` file under root, not following symlinks, at most MAX_SCAN_DEPTH levels down. */
export async function scanPidFiles(root: string, depth = MAX_SCAN_DEPTH): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(root, { withFileTypes: true });
  } catch {
    return []; // unreadable or vanished while scanning: nothing of ours can be found there
  }
  const found: string[] = [];
  for (const entry of entries) {
    const full = path.join(root, entry.name);
    if (entry.isFile() && isPidFileName(entry.name)) found.push(full);
    else if (entry.isDirectory() && depth > 0) found.push(...(await scanPidFiles(full, depth - 1)));
  }
  return found;
}

async function registryEntries(dir: string): Promise<unknown[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const records: unknown[] = [];
  for (const name of names.filter((n) => /^[0-9]+\.json$/.test(n))) {
    try {
      records.push(JSON.parse(await readFile(path.join(dir, name), 'utf8')));
    } catch {
      // A half-written or foreign file names no instance.
    }
  }
  return records;
}

/** Pid files named by one agent's instance registry (see the agent's instance-layout.ts and postgres/layout.ts). */
export async function registryPidFiles(stateDir: string): Promise<string[]> {
  const files: string[] = [];
  for (const record of await registryEntries(path.join(stateDir, 'mariadb'))) {
    const spec = (record as { spec?: { port?: unknown; datadir?: unknown; logdir?: unknown; wal_log_dir?: unknown } }).spec;
    if (typeof spec?.port === 'number' && typeof spec.datadir === 'string' && typeof spec.logdir === 'string' && typeof spec.wal_log_dir === 'string') {
      files.push(instanceLayout({ port: spec.port, datadir: spec.datadir, logdir: spec.logdir, wal_log_dir: spec.wal_log_dir }).pidFile);
    }
  }
  for (const record of await registryEntries(path.join(stateDir, 'postgres'))) {
    const datadir = (record as { datadir?: unknown }).datadir;
    if (typeof datadir === 'string' && path.isAbsolute(datadir)) files.push(path.join(datadir, 'postmaster.pid'));
  }
  return files;
}

/** The instances whose pid files name a pid, from both sources, each pid file once. */
export async function findInstances(dir: string, agentStateDirs: readonly string[]): Promise<InstancePidFile[]> {
  const pidFiles = new Set(await scanPidFiles(dir));
  for (const stateDir of agentStateDirs) for (const file of await registryPidFiles(stateDir)) pidFiles.add(path.resolve(file));
  const instances: InstancePidFile[] = [];
  for (const pidFile of [...pidFiles].sort()) {
    const text = await readFile(pidFile, 'utf8').catch(() => '');
    const pid = parsePidFile(text);
    if (pid !== undefined) instances.push({ pidFile, pid, root: instanceRootOf(pidFile) });
  }
  return instances;
}

/** An instance as a process `down` may stop: ours only while its argv names its directory. */
export function instanceProcess(instance: InstancePidFile): OwnedProcess {
  const isPostgres = path.basename(instance.pidFile) === 'postmaster.pid';
  return {
    label: `${isPostgres ? 'postgres' : path.basename(instance.pidFile, '.pid')} ${instance.root}`,
    pid: instance.pid,
    isOurs: (argv) => argvMentionsDir(argv, instance.root),
    // SIGINT is postgres's "fast" shutdown (SIGTERM would wait for every client to leave).
    stopSignal: isPostgres ? 'SIGINT' : 'SIGTERM',
  };
}

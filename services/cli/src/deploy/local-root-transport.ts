// A host standing in a directory of this machine (global.transport local-root): the
// packages are unpacked into <root> with dpkg-deb -x (no maintainer scripts, no dpkg
// database: what was installed is recorded in <root>/var/lib/kcm-local-root/), files are
// written under <root>, and each daemon is started the way its installed unit's ExecStart
// would start it, with every path of kcm's under the root:
//   - the unit file is read from <root>/lib/systemd/system, its EnvironmentFile from <root>;
//   - an absolute path in the command line (or in an --option=value) is moved under the
//     root when the root has it (the package's /usr/bin/kcm-agent) or it is one of kcm's
//     own directories (/etc/kcm, /var/lib/kcm, ...); anything else (/usr/bin/node, the
//     engines' binaries) is the machine's, as on a real host;
//   - StateDirectory=/LogsDirectory= are made under <root>/var/lib, <root>/var/log.
// Differences from systemd, on purpose: User=/Group= are not switched to (the daemon runs as
// the caller: no `kcm` user exists without the postinst); no Restart=; output goes to
// <root>/var/log/kcm/<unit>.log instead of the journal. The pid and argv of each daemon are
// recorded in <root>/run/kcm-local-root/<unit>.json, and a pid is only signalled while its
// /proc cmdline is still that argv (local/processes.ts).

import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { processState, stopProcesses } from '../local/processes';
import type { HostDirectory, HostFile } from './host-plan';
import { UNIT_DIR, type DebPackage } from './package-units';
import { parseUnitFile, serviceCommand, unitValues } from './systemd-unit';
import type { HostTransport, UnitToStart } from './transport';

/** kcm's own directories: a path under one of them in a unit is the host's, so under the root. */
export const KCM_OWN_DIRS = ['/etc/kcm', '/var/lib/kcm', '/var/log/kcm', '/run/kcm', '/usr/lib/kcm', '/usr/bin/kcm', '/opt/kcm'];

export const INSTALLED_DIR = 'var/lib/kcm-local-root';
export const RUN_DIR = 'run/kcm-local-root';

interface DaemonRecord {
  pid: number;
  argv: string[];
}

export class LocalRootTransport implements HostTransport {
  readonly describe: string;

  constructor(readonly root: string) {
    this.describe = `local-root ${root}`;
  }

  /** A host path moved under the root when it is kcm's (see the header); else unchanged. */
  rooted(value: string): string {
    if (!path.isAbsolute(value) || value === this.root || value.startsWith(`${this.root}/`)) return value;
    const own = KCM_OWN_DIRS.some((dir) => value === dir || value.startsWith(`${dir}/`) || value.startsWith(`${dir}-`));
    return own || existsSync(path.join(this.root, value)) ? path.join(this.root, value) : value;
  }

  private rootedWord(word: string): string {
    const eq = word.startsWith('-') ? word.indexOf('=') : -1;
    return eq > 0 ? `${word.slice(0, eq + 1)}${this.rooted(word.slice(eq + 1))}` : this.rooted(word);
  }

  async installedVersion(pkg: DebPackage['name']): Promise<string | undefined> {
    try {
      return (await readFile(path.join(this.root, INSTALLED_DIR, pkg), 'utf8')).trim();
    } catch {
      return undefined;
    }
  }

  async install(pkg: DebPackage): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o755 });
    execFileSync('dpkg-deb', ['-x', pkg.file, this.root]);
    await mkdir(path.join(this.root, INSTALLED_DIR), { recursive: true });
    await writeFile(path.join(this.root, INSTALLED_DIR, pkg.name), `${pkg.version}\n`);
  }

  async readFile(file: string): Promise<Buffer | undefined> {
    try {
      return await readFile(file);
    } catch {
      return undefined;
    }
  }

  async makeDirectory(dir: HostDirectory): Promise<void> {
    if (!dir.path.startsWith(`${this.root}/`)) throw new Error(`${dir.path} is outside the host's root ${this.root}`);
    // Every missing component from the root down gets the mode, as `install -d` gives it on a host.
    const parts = path.relative(this.root, dir.path).split(path.sep);
    for (let i = 1; i <= parts.length; i++) {
      const at = path.join(this.root, ...parts.slice(0, i));
      if (existsSync(at) && i < parts.length) continue;
      await mkdir(at, { recursive: true, mode: dir.mode });
      await chmod(at, dir.mode);
    }
  }

  async writeFile(file: HostFile): Promise<void> {
    if (!file.path.startsWith(`${this.root}/`)) throw new Error(`${file.path} is outside the host's root ${this.root}`);
    await mkdir(path.dirname(file.path), { recursive: true, mode: 0o755 });
    const partial = `${file.path}.${process.pid}.tmp`;
    await writeFile(partial, file.content, { mode: file.mode });
    await chmod(partial, file.mode);
    await rename(partial, file.path);
  }

  private recordFile(unitName: string): string {
    return path.join(this.root, RUN_DIR, `${unitName}.json`);
  }

  private async record(unitName: string): Promise<DaemonRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.recordFile(unitName), 'utf8')) as DaemonRecord;
    } catch {
      return undefined;
    }
  }

  /** The daemon's command line and environment, from the unit installed under the root. */
  async command(start: UnitToStart): Promise<{ argv: string[]; env: Map<string, string>; cwd: string; dirs: string[] }> {
    const unitName = start.unit.unitFor(start.instance);
    const unit = parseUnitFile(await readFile(path.join(this.root, UNIT_DIR, start.unit.fileName), 'utf8'));
    const command = serviceCommand({
      unit,
      unitName,
      instance: start.instance,
      readEnvironmentFile: (file) => {
        try {
          return execFileSync('cat', [this.rooted(file)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
        } catch {
          return undefined;
        }
      },
    });
    const env = new Map([...command.env].map(([k, v]): [string, string] => [k, this.rooted(v)]));
    // StateDirectory=kcm/manager is /var/lib/kcm/manager, LogsDirectory= under /var/log (systemd.exec(5)).
    const dirs = [
      ...unitValues(unit, 'Service', 'StateDirectory').flatMap((v) => v.split(/\s+/)).map((d) => path.join(this.root, 'var/lib', d)),
      ...unitValues(unit, 'Service', 'LogsDirectory').flatMap((v) => v.split(/\s+/)).map((d) => path.join(this.root, 'var/log', d)),
    ];
    return {
      argv: command.argv.map((w) => this.rootedWord(w)),
      env,
      cwd: command.workingDirectory === undefined ? this.root : this.rooted(command.workingDirectory),
      dirs,
    };
  }

  async isRunning(start: UnitToStart): Promise<boolean> {
    const recorded = await this.record(start.unit.unitFor(start.instance));
    if (recorded === undefined) return false;
    return (await processState({ pid: recorded.pid, isOurs: (argv) => runsCommand(recorded.argv, argv) })) === 'running';
  }

  async start(start: UnitToStart): Promise<void> {
    if (await this.isRunning(start)) return;
    const unitName = start.unit.unitFor(start.instance);
    const { argv, env, cwd, dirs } = await this.command(start);
    for (const dir of dirs) await mkdir(dir, { recursive: true, mode: 0o700 });
    const logPath = path.join(this.root, 'var/log/kcm', `${unitName}.log`);
    await mkdir(path.dirname(logPath), { recursive: true });
    const log = openSync(logPath, 'a', 0o600);
    let pid: number | undefined;
    try {
      // The caller's PATH and HOME (node is found as on the host); the unit's variables over them.
      const child = spawn(argv[0], argv.slice(1), { cwd, detached: true, stdio: ['ignore', log, log], env: { ...process.env, ...Object.fromEntries(env) } });
      pid = child.pid;
      if (pid === undefined) {
        const failure = await new Promise<Error>((resolve) => child.once('error', resolve));
        throw new Error(`${this.describe}: could not start ${unitName} (${argv.join(' ')}): ${failure.message}`);
      }
      child.unref();
    } finally {
      closeSync(log);
    }
    await mkdir(path.join(this.root, RUN_DIR), { recursive: true });
    await writeFile(this.recordFile(unitName), `${JSON.stringify({ pid, argv })}\n`);
  }

  async stop(start: UnitToStart): Promise<void> {
    const unitName = start.unit.unitFor(start.instance);
    const recorded = await this.record(unitName);
    if (recorded === undefined) return;
    await stopProcesses([{ label: `${unitName} on ${this.root}`, pid: recorded.pid, isOurs: (argv) => runsCommand(recorded.argv, argv), stopSignal: 'SIGTERM' }], { graceMs: 30_000 });
  }
}

/**
 * True when a live /proc cmdline is the command we started: the same argv, or, for a script
 * run through its #! line (/usr/bin/kcm-agent is `#!/usr/bin/env node`), the interpreter
 * followed by the script's path and then exactly our arguments.
 */
export function runsCommand(started: readonly string[], live: readonly string[]): boolean {
  const args = started.slice(1);
  if (live.length < args.length + 1) return false;
  const tail = live.slice(live.length - args.length);
  if (!args.every((a, i) => a === tail[i])) return false;
  const head = live.slice(0, live.length - args.length);
  return head[0] === started[0] || head[head.length - 1] === started[0];
}

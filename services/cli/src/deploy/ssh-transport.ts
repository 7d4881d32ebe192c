// A real host over ssh: packages copied with scp and installed with `sudo dpkg -i` (its
// postinst creates the kcm user and /etc/kcm), files written through `sudo install` from
// stdin (never a shell string built from their contents), units started with
// `sudo systemctl enable --now`. Every remote command is an argv array passed to ssh after
// `--`; each word is quoted for the remote shell, so a path cannot become a command.

import { spawn } from 'node:child_process';
import path from 'node:path';
import type { HostDirectory, HostFile } from './host-plan';
import type { DebPackage } from './package-units';
import type { HostTransport, UnitToStart } from './transport';

export interface CommandResult {
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** Runs argv (no shell) with optional stdin; tests give a recorder instead. */
export type CommandRunner = (argv: readonly string[], stdin?: Buffer) => Promise<CommandResult>;

export const runCommand: CommandRunner = (argv, stdin) =>
  new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out), stderr: err }));
    child.stdin.end(stdin ?? Buffer.alloc(0));
  });

/** One word for a POSIX shell (ssh hands the remote command to the login shell). */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

export class RemoteCommandError extends Error {
  constructor(host: string, argv: readonly string[], result: CommandResult) {
    super(`${host}: ${argv.join(' ')} exited ${result.code}: ${result.stderr.trim().split('\n').slice(-3).join(' / ')}`);
    this.name = 'RemoteCommandError';
  }
}

/** Where packages are copied on the host before dpkg -i (removed after). */
export const REMOTE_SPOOL = '/tmp/kcm-deploy';

export class SshTransport implements HostTransport {
  readonly describe: string;
  private readonly target: string;

  constructor(
    host: string,
    user: string | undefined,
    private readonly run: CommandRunner = runCommand,
  ) {
    this.target = user === undefined ? host : `${user}@${host}`;
    this.describe = `ssh ${this.target}`;
  }

  /** ssh argv for a remote command: batch mode (no password prompt hangs a deploy), words quoted. */
  sshArgv(remote: readonly string[]): string[] {
    return ['ssh', '-o', 'BatchMode=yes', this.target, '--', remote.map(shellQuote).join(' ')];
  }

  private async remote(remote: readonly string[], stdin?: Buffer): Promise<CommandResult> {
    return this.run(this.sshArgv(remote), stdin);
  }

  private async mustRemote(remote: readonly string[], stdin?: Buffer): Promise<CommandResult> {
    const result = await this.remote(remote, stdin);
    if (result.code !== 0) throw new RemoteCommandError(this.target, remote, result);
    return result;
  }

  async installedVersion(pkg: DebPackage['name']): Promise<string | undefined> {
    const result = await this.remote(['dpkg-query', '--show', '--showformat=${db:Status-Status} ${Version}', pkg]);
    const [status, version] = result.stdout.toString().trim().split(' ');
    return result.code === 0 && status === 'installed' ? version : undefined;
  }

  async install(pkg: DebPackage): Promise<void> {
    const remoteFile = `${REMOTE_SPOOL}/${path.basename(pkg.file)}`;
    await this.mustRemote(['mkdir', '-p', REMOTE_SPOOL]);
    const copy = ['scp', '-o', 'BatchMode=yes', '-q', pkg.file, `${this.target}:${remoteFile}`];
    const copied = await this.run(copy);
    if (copied.code !== 0) throw new RemoteCommandError(this.target, copy, copied);
    await this.mustRemote(['sudo', 'dpkg', '-i', remoteFile]);
    await this.mustRemote(['rm', '-f', remoteFile]);
  }

  async readFile(file: string): Promise<Buffer | undefined> {
    const result = await this.remote(['sudo', 'cat', file]);
    return result.code === 0 ? result.stdout : undefined;
  }

  async makeDirectory(dir: HostDirectory): Promise<void> {
    await this.mustRemote(['sudo', 'install', '-d', '-m', dir.mode.toString(8).padStart(4, '0'), '-o', dir.owner, '-g', dir.owner, dir.path]);
  }

  async writeFile(file: HostFile): Promise<void> {
    const group = file.owner === 'kcm' ? 'kcm' : 'root';
    await this.mustRemote(['sudo', 'install', '-D', '-m', file.mode.toString(8).padStart(4, '0'), '-o', file.owner, '-g', group, '/dev/stdin', file.path], file.content);
  }

  async isRunning(start: UnitToStart): Promise<boolean> {
    return (await this.remote(['systemctl', 'is-active', '--quiet', start.unit.unitFor(start.instance)])).code === 0;
  }

  async start(start: UnitToStart): Promise<void> {
    await this.mustRemote(['sudo', 'systemctl', 'enable', '--now', start.unit.unitFor(start.instance)]);
  }

  async stop(start: UnitToStart): Promise<void> {
    await this.mustRemote(['sudo', 'systemctl', 'stop', start.unit.unitFor(start.instance)]);
  }
}

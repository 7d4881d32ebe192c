import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { argvMentionsDir, parseCmdline, parsePidFile, processState, readCmdline, sameArgv, stopProcesses, type OwnedProcess } from '../../src/local/processes';

describe('pid files and /proc cmdlines', () => {
  it('reads the pid from the first line of a pid file, as mariadbd and postgres write them', () => {
    expect(parsePidFile('12345\n')).toBe(12345);
    expect(parsePidFile('4242\n/var/lib/pg/data\n1700000000\n5432\n/var/run/postgresql\n*\n  5432001 0\nready   \n')).toBe(4242);
    expect(parsePidFile(' 77 ')).toBe(77);
  });

  it('finds no pid in an empty, garbled or dangerous pid file', () => {
    expect(parsePidFile('')).toBeUndefined();
    expect(parsePidFile('abc\n')).toBeUndefined();
    expect(parsePidFile('-1\n')).toBeUndefined();
    expect(parsePidFile('0\n')).toBeUndefined();
    expect(parsePidFile('1\n')).toBeUndefined(); // init: never ours
    expect(parsePidFile('12 34\n')).toBeUndefined();
    expect(parsePidFile('99999999999999999999\n')).toBeUndefined();
  });

  it('splits a NUL-separated cmdline into argv, keeping empty arguments', () => {
    expect(parseCmdline('node\0--import\0tsx\0main.ts\0')).toEqual(['node', '--import', 'tsx', 'main.ts']);
    expect(parseCmdline('a\0\0b\0')).toEqual(['a', '', 'b']);
    expect(parseCmdline('')).toEqual([]);
  });

  it('matches a recorded argv only exactly', () => {
    expect(sameArgv(['node', 'a.ts', '--config', '/d/c.json'], ['node', 'a.ts', '--config', '/d/c.json'])).toBe(true);
    expect(sameArgv(['node', 'a.ts', '--config', '/d/c.json'], ['node', 'a.ts', '--config', '/e/c.json'])).toBe(false);
    expect(sameArgv(['node', 'a.ts'], ['node', 'a.ts', 'extra'])).toBe(false);
  });

  it('recognises an instance by a path argument inside its directory, alone or as --option=value', () => {
    expect(argvMentionsDir(['/usr/lib/postgresql/15/bin/postgres', '-D', '/k/server/5432'], '/k/server/5432')).toBe(true);
    expect(argvMentionsDir(['/usr/sbin/mariadbd', '--defaults-file=/k/storage/57001/my.cnf'], '/k/storage/57001')).toBe(true);
    expect(argvMentionsDir(['/usr/sbin/mariadbd', '--defaults-file=/k/storage/570011/my.cnf'], '/k/storage/57001')).toBe(false);
    expect(argvMentionsDir(['postgres: checkpointer'], '/k/server/5432')).toBe(false);
    expect(argvMentionsDir(['sleep', '300'], '/k')).toBe(false);
    expect(argvMentionsDir(['cat', 'relative/k/server'], '/k')).toBe(false);
  });
});

/** Live (non-zombie) processes whose process group is pgid. */
async function groupMembers(pgid: number): Promise<number[]> {
  const members: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
  }
  return members;
}

describe('stopping recorded processes', () => {
  const children: ChildProcess[] = [];
  const start = (file: string, args: string[]) => {
    const child = spawn(file, args, { detached: true, stdio: 'ignore' });
    children.push(child);
    return child;
  };
  const exited = (child: ChildProcess) =>
    new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
  const owned = (child: ChildProcess, argv: string[]): OwnedProcess => ({
    label: argv.join(' '),
    pid: child.pid!,
    isOurs: (actual) => sameArgv(argv, actual),
    stopSignal: 'SIGTERM',
  });

  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  it('sees a live process as running while its argv matches, and as replaced when it does not', async () => {
    const child = start('sleep', ['30']);
    await new Promise((r) => setTimeout(r, 50));
    expect(await readCmdline(child.pid!)).toEqual(['sleep', '30']);
    expect(await processState(owned(child, ['sleep', '30']))).toBe('running');
    expect(await processState(owned(child, ['sleep', '31']))).toBe('replaced');
    child.kill('SIGKILL');
    await exited(child);
    expect(await processState(owned(child, ['sleep', '30']))).toBe('gone');
  });

  it('stops a process with its polite signal and never signals a pid whose argv is not the recorded one', async () => {
    const polite = start('sleep', ['30']);
    const stranger = start('sleep', ['31']);
    await new Promise((r) => setTimeout(r, 50));
    const outcomes = await stopProcesses([owned(polite, ['sleep', '30']), owned(stranger, ['sleep', '30'])], { graceMs: 5_000, pollMs: 20 });
    expect(outcomes.map((o) => o.result)).toEqual(['stopped', 'not-running']);
    await exited(polite);
    expect(polite.signalCode).toBe('SIGTERM');
    expect(stranger.exitCode).toBeNull();
    expect(stranger.signalCode).toBeNull();
  });

  it('kills a process that ignores SIGTERM after the grace period, with its process group', async () => {
    const script = 'trap "" TERM; sleep 30 & wait';
    const stubborn = start('bash', ['-c', script]);
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    const [outcome] = await stopProcesses([owned(stubborn, ['bash', '-c', script])], { graceMs: 300, pollMs: 20 });
    expect(outcome.result).toBe('killed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    await exited(stubborn);
    expect(stubborn.signalCode).toBe('SIGKILL');
    // The group went with it: the backgrounded `sleep 30` is gone too (it may take a moment to be reaped).
    const deadline = Date.now() + 2_000;
    while ((await groupMembers(stubborn.pid!)).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await groupMembers(stubborn.pid!)).toEqual([]);
  });
});

// kcm local's command flow against recorded processes that are plain `sleep`s and `tail`s:
// what up, status and down decide, without starting a manager group (test/local does that).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readCmdline } from '../../src/local/processes';
import { readRecord, RECORD_VERSION, writeRecord, type DeploymentRecord } from '../../src/local/record';
import { runKcm } from '../helpers';

let dir: string;
const children: ChildProcess[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kcm-local-cmd-'));
});
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

function start(argv: string[]): ChildProcess {
  const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: 'ignore' });
  children.push(child);
  return child;
}
const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;
const settle = () => new Promise((r) => setTimeout(r, 100));

/** A record whose "manager" and "agent" are the given processes (argv as recorded). */
function recordOf(manager: { pid: number; argv: string[] }, agent: { pid: number; argv: string[] }): DeploymentRecord {
  return {
    version: RECORD_VERSION,
    dir,
    startedAt: '2026-01-01T00:00:00.000Z',
    managerNet: '127.0.1',
    agentNet: '127.0.2',
    first: 231,
    managers: [{ index: 1, member: '127.0.1.231:58000', url: 'https://127.0.1.231:58000', log: path.join(dir, 'manager-1/manager.log'), ...manager }],
    agents: [{ index: 1, hostaddr: '127.0.2.231', port: 58100, stateDir: path.join(dir, 'agent-1/state'), machineFile: path.join(dir, 'agent-1/create_machine.json'), log: path.join(dir, 'agent-1/agent.log'), ...agent }],
  };
}

describe('kcm local command line', () => {
  it('explains its subcommands and options with --help', async () => {
    const { code, stdout } = await runKcm(['local', '--help']);
    expect(code).toBe(0);
    for (const text of ['kcm local up', 'kcm local status', 'kcm local down', '--managers', '--hosts', '--dir', '--purge', 'postmaster.pid', '/proc/<pid>/cmdline']) expect(stdout).toContain(text);
  });

  it('rejects an unknown subcommand, a flag of another subcommand and a malformed count', async () => {
    expect((await runKcm(['local'])).stderr).toContain('local needs a subcommand: up, down, status');
    expect((await runKcm(['local', 'restart'])).stderr).toContain('unknown local subcommand "restart"');
    const purgeOnUp = await runKcm(['local', 'up', '--purge', '--dir', dir]);
    expect(purgeOnUp.code).toBe(2);
    expect(purgeOnUp.stderr).toContain('--purge is an option of local down, not local up');
    const badCount = await runKcm(['local', 'up', '--managers', 'three', '--dir', dir]);
    expect(badCount.code).toBe(2);
    expect(badCount.stderr).toContain('--managers must be a whole number, got "three"');
    expect((await runKcm(['local', 'up', '--managers', '0', '--dir', dir])).stderr).toContain('--managers must be an integer >= 1');
  });

  it('status and down say there is nothing where nothing was started, and --purge will not delete a directory kcm did not make', async () => {
    const status = await runKcm(['local', 'status', '--dir', dir]);
    expect(status.code).toBe(1);
    expect(status.stderr).toContain('no kcm local deployment in');
    const down = await runKcm(['local', 'down', '--dir', dir]);
    expect(down.code).toBe(0);
    expect(down.stdout).toContain('nothing to stop');
    const purge = await runKcm(['local', 'down', '--purge', '--dir', dir]);
    expect(purge.code).toBe(1);
    expect(purge.stderr).toContain('it has no local.json');
  });

  it('up starts nothing and names the address when a port it needs is taken', async () => {
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen({ host: '127.0.1.241', port: 58001 }, resolve));
    try {
      const { code, stderr } = await runKcm(['local', 'up', '--managers', '1', '--hosts', '0', '--first', '241', '--dir', dir]);
      expect(code).toBe(1);
      expect(stderr).toContain('127.0.1.241:58001 is already in use');
      expect(stderr).toContain('Nothing was started.');
      expect((await runKcm(['local', 'status', '--dir', dir])).stderr).toContain('no kcm local deployment');
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it('up on a deployment that is running only prints its endpoints', async () => {
    const manager = start(['sleep', '60']);
    const agent = start(['sleep', '61']);
    await settle();
    await writeRecord(recordOf({ pid: manager.pid!, argv: ['sleep', '60'] }, { pid: agent.pid!, argv: ['sleep', '61'] }));
    const { code, stdout } = await runKcm(['local', 'up', '--managers', '1', '--hosts', '1', '--first', '231', '--dir', dir, '--json']);
    expect(code).toBe(0);
    const shown = JSON.parse(stdout);
    expect(shown.alreadyRunning).toBe(true);
    expect(shown.managers).toEqual([{ member: '127.0.1.231:58000', url: 'https://127.0.1.231:58000', pid: manager.pid, log: path.join(dir, 'manager-1/manager.log') }]);
    expect(shown.agents[0]).toMatchObject({ hostaddr: '127.0.2.231', port: 58100, pid: agent.pid });
    expect(shown.console).toBe('https://127.0.1.231:58000/ui/');
    const text = await runKcm(['local', 'up', '--managers', '1', '--hosts', '1', '--first', '231', '--dir', dir]);
    expect(text.stdout).toContain('Web console: https://127.0.1.231:58000/ui/');
  });

  it('status shows each process alive and a manager that does not answer, and exits 1 without a leader', async () => {
    const manager = start(['sleep', '60']);
    const agent = start(['sleep', '61']);
    await settle();
    await writeRecord(recordOf({ pid: manager.pid!, argv: ['sleep', '60'] }, { pid: agent.pid!, argv: ['sleep', '61'] }));
    const { code, stdout } = await runKcm(['local', 'status', '--dir', dir]);
    expect(code).toBe(1);
    expect(stdout).toContain('all processes running');
    expect(stdout).toMatch(/https:\/\/127\.0\.1\.231:58000 +pid \d+ +log .*manager\.log  running/);
    expect(stdout).toContain('Group: no member reports a leader');
    expect(stdout).toContain('https://127.0.1.231:58000 unreachable (ECONNREFUSED)');
    agent.kill('SIGKILL');
    await settle();
    const after = await runKcm(['local', 'status', '--dir', dir, '--json']);
    expect(JSON.parse(after.stdout)).toMatchObject({ running: 'partial', leaderKnown: false, agents: [{ running: false }] });
  });

  it('up on a partly running deployment starts the recorded processes that are not running and leaves the others alone', async () => {
    const manager = start(['sleep', '60']);
    await settle();
    // The agent died (its pid is gone); the manager still runs.
    await writeRecord(recordOf({ pid: manager.pid!, argv: ['sleep', '60'] }, { pid: 2 ** 22 + 7, argv: ['sleep', '61'] }));
    const { stderr } = await runKcm(['local', 'up', '--managers', '1', '--hosts', '1', '--first', '231', '--dir', dir, '--timeout', '1']);
    expect(stderr).not.toContain('partly running');
    expect(stderr).toContain('restarted agent 127.0.2.231:58100 (the others were running)');
    const after = await readRecord(dir);
    const agentPid = after!.agents[0].pid;
    try {
      expect(after!.managers[0].pid).toBe(manager.pid);
      expect(agentPid).not.toBe(2 ** 22 + 7);
      expect(await readCmdline(agentPid)).toEqual(['sleep', '61']);
      const status = JSON.parse((await runKcm(['local', 'status', '--dir', dir, '--json'])).stdout);
      expect(status.running).toBe('all');
    } finally {
      process.kill(agentPid, 'SIGKILL');
    }
  });

  it('down stops the recorded processes and the instances under its directory, and leaves a reused pid alone', async () => {
    const manager = start(['sleep', '60']);
    // The agent's pid now belongs to another program: its argv differs from the recorded one.
    const stranger = start(['sleep', '62']);
    const instanceRoot = path.join(dir, 'agent-1/instances/storage_datadir/57001');
    await mkdir(path.join(instanceRoot, 'run'), { recursive: true });
    await writeFile(path.join(instanceRoot, 'my.cnf'), '');
    const instance = start(['tail', '-f', `--pid=${process.pid}`, path.join(instanceRoot, 'my.cnf')]);
    // A postmaster.pid whose pid is a process that does not name that data directory.
    const decoyRoot = path.join(dir, 'agent-1/instances/server_datadir/5432');
    const decoy = start(['sleep', '63']);
    await mkdir(decoyRoot, { recursive: true });
    await settle();
    await writeFile(path.join(instanceRoot, 'run/mariadbd.pid'), `${instance.pid}\n`);
    await writeFile(path.join(decoyRoot, 'postmaster.pid'), `${decoy.pid}\n${decoyRoot}\n`);
    await writeRecord(recordOf({ pid: manager.pid!, argv: ['sleep', '60'] }, { pid: stranger.pid!, argv: ['node', 'agent.ts'] }));

    const { code, stdout } = await runKcm(['local', 'down', '--dir', dir, '--json']);
    expect(code).toBe(0);
    const stopped = JSON.parse(stdout).stopped as Array<{ pid: number; result: string }>;
    const resultOf = (pid: number | undefined) => stopped.find((s) => s.pid === pid)?.result;
    expect(resultOf(manager.pid)).toBe('stopped');
    expect(resultOf(stranger.pid)).toBe('not-running');
    expect(resultOf(instance.pid)).toBe('stopped');
    expect(resultOf(decoy.pid)).toBe('not-running');
    await settle();
    expect(alive(manager)).toBe(false);
    expect(alive(instance)).toBe(false);
    expect(alive(stranger)).toBe(true);
    expect(alive(decoy)).toBe(true);
  });
});

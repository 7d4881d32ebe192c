// The side effects of `kcm local up`: check that every address can be bound, write the
// configuration files, start each service detached with its output in its own log.

import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { ensureSecretsKey, secretsKeyPath } from './secrets-key';
import { connect, createServer } from 'node:net';
import path from 'node:path';
import { PROTOCOL_VERSION } from '@kcm/protocol';
import { issueLocalCertificates } from './certificates';
import { machineParas, managerConfig, type Topology } from './topology';
import { ensureAdminToken, tokenSha256 } from './admin-token';

export interface BindProblem {
  address: string;
  /** EADDRINUSE, EADDRNOTAVAIL, EACCES, ... */
  code: string;
}

/** Tries to listen on host:port and closes again at once; undefined when it can be bound. */
export function probeBind(host: string, port: number): Promise<BindProblem | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve({ address: `${host}:${port}`, code: err.code ?? err.message }));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** Every address:port the deployment will listen on, probed in turn. */
export async function bindProblems(topology: Topology): Promise<BindProblem[]> {
  const wanted: Array<[string, number]> = [
    ...topology.managers.flatMap((m) => m.ports.map((port): [string, number] => [m.host, port])),
    ...topology.agents.map((a): [string, number] => [a.hostaddr, a.port]),
  ];
  const problems: BindProblem[] = [];
  for (const [host, port] of wanted) {
    const problem = await probeBind(host, port);
    if (problem) problems.push(problem);
  }
  return problems;
}

export function describeBindProblem(problem: BindProblem): string {
  switch (problem.code) {
    case 'EADDRINUSE':
      return `${problem.address} is already in use (another kcm local, or another program: ss -ltnp | grep ${problem.address})`;
    case 'EADDRNOTAVAIL':
      return `${problem.address} cannot be bound: the address is not configured on this machine`;
    case 'EACCES':
      return `${problem.address} cannot be bound: permission denied`;
    default:
      return `${problem.address} cannot be bound (${problem.code})`;
  }
}

/** Manager configs and per-host create_machine files, and the directories every process needs. */
/** Writes the configs and machine files; returns the deployment's admin token (made on the first `up`). */
export async function writeDeploymentFiles(topology: Topology): Promise<string> {
  // 0711: database instances placed under an agent's directory run as mysql/postgres and
  // must traverse it; no other user may list or read it. Managers' directories are 0700.
  await mkdir(topology.dir, { recursive: true, mode: 0o711 });
  await chmod(topology.dir, 0o711);
  const token = await ensureAdminToken(topology.dir);
  await ensureSecretsKey(secretsKeyPath(topology.dir));
  issueLocalCertificates(topology);
  for (const manager of topology.managers) {
    await mkdir(manager.dataDir, { recursive: true, mode: 0o700 });
    await chmod(manager.dir, 0o700);
    await chmod(manager.dataDir, 0o700);
    await writeFile(manager.configPath, `${JSON.stringify(managerConfig(topology, manager, tokenSha256(token)), null, 2)}\n`, { mode: 0o600 });
  }
  for (const agent of topology.agents) {
    await mkdir(agent.stateDir, { recursive: true, mode: 0o700 });
    await chmod(agent.dir, 0o711);
    await chmod(agent.stateDir, 0o700);
    const envelope = {
      version: PROTOCOL_VERSION,
      job_id: '',
      job_type: 'create_machine',
      timestamp: '0',
      user_name: 'local',
      paras: machineParas(agent),
    };
    await writeFile(agent.machineFile, `${JSON.stringify(envelope, null, 2)}\n`);
  }
  return token;
}

/**
 * Starts argv detached (its own session and process group, no pipes to us) with stdout and
 * stderr appended to logPath, and returns its pid. The caller records the pid; we never wait
 * for the child, so `kcm local up` can exit and leave it running.
 */
export async function startDetached(argv: readonly string[], logPath: string, cwd: string): Promise<number> {
  await mkdir(path.dirname(logPath), { recursive: true });
  const log = openSync(logPath, 'a', 0o600);
  try {
    const child = spawn(argv[0], argv.slice(1), { cwd, detached: true, stdio: ['ignore', log, log], env: process.env });
    const pid = child.pid;
    if (pid === undefined) {
      const failure = await new Promise<Error>((resolve) => child.once('error', resolve));
      throw new Error(`could not start ${argv.join(' ')}: ${failure.message}`);
    }
    child.unref();
    return pid;
  } finally {
    closeSync(log);
  }
}

/** The last lines of a log file, for a failure message ("(empty)" / "(missing)" when there are none). */
export async function logTail(file: string, lines = 15): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return ['(missing)'];
  }
  const all = text.trimEnd().split('\n');
  return all.length === 1 && all[0] === '' ? ['(empty)'] : all.slice(-lines);
}

/** True once something accepts TCP connections on host:port. */
export function acceptsConnections(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Waits until every address accepts connections; returns those that still do not at the deadline. */
export async function waitListening(addresses: ReadonlyArray<{ host: string; port: number }>, deadline: number): Promise<string[]> {
  let pending = [...addresses];
  for (;;) {
    const answers = await Promise.all(pending.map((a) => acceptsConnections(a.host, a.port)));
    pending = pending.filter((_, i) => !answers[i]);
    if (pending.length === 0 || Date.now() >= deadline) return pending.map((a) => `${a.host}:${a.port}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

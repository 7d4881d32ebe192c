// Real manager and agent processes for cross-process tests, soaks and benchmarks.
//
// Each process is `node --import tsx <main.ts>`: one OS process per member, so SIGKILL and
// SIGSTOP hit exactly the member named (the `tsx` CLI runs the program in a child process
// and would leave an orphan behind a SIGKILL). stdout and stderr go to a log file per
// member, appended across restarts, so a test can read every JSON line a member wrote.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readJsonLog, type LogLine } from './logs';
import { testSecretsKeyFile } from '../../helpers/secrets';
import { testTokenConfig } from '../../helpers/tokens';
import { agentTlsArgs, managerTls } from '../../helpers/pki';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const MANAGER_MAIN = path.join(REPO_ROOT, 'services/manager/src/main.ts');
const AGENT_MAIN = path.join(REPO_ROOT, 'services/agent/src/main.ts');

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(everyMs);
  }
}

/** One OS process with its log file; restartable with the same arguments. */
export class ManagedProcess {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  stopped = false;
  /**
   * The kcm checkout the process runs from: its main script (the first argument, a path in
   * this checkout) is taken from there, and it runs there. Another build's checkout
   * (test/upgrade/previous-build.ts) makes a process of that build; the next start() uses it.
   */
  root = REPO_ROOT;

  constructor(
    readonly name: string,
    private readonly args: string[],
    readonly logFile: string,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.running) throw new Error(`${this.name} is already running`);
    const fd = openSync(this.logFile, 'a');
    // Extra node flags for every process, e.g. KCM_TEST_NODE_ARGS=--cpu-prof to profile a run.
    const nodeArgs = (process.env.KCM_TEST_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0);
    const [main, ...rest] = this.args;
    const script = this.root === REPO_ROOT ? main : path.join(this.root, path.relative(REPO_ROOT, main));
    const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...rest], { cwd: this.root, stdio: ['ignore', fd, fd], env: { ...process.env, KCM_LOG_LEVEL: 'info' } });
    closeSync(fd);
    this.child = child;
    this.stopped = false;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  /** Sends `signal`; for SIGKILL and SIGTERM waits until the process is gone. */
  async signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    if (signal === 'SIGSTOP') this.stopped = true;
    if (signal === 'SIGCONT') this.stopped = false;
    child.kill(signal);
    if (signal === 'SIGKILL' || signal === 'SIGTERM') await this.exited;
  }

  async kill(): Promise<void> {
    // A stopped process still dies of SIGKILL; nothing else is needed.
    await this.signal('SIGKILL');
    this.stopped = false;
  }

  logLines(): LogLine[] {
    return readJsonLog(this.logFile);
  }
}

export interface ManagerSpec {
  /** `<host>:<port>`: HTTP on port, Raft on port + 1. */
  member: string;
  initialMembers?: string[];
  join?: boolean;
  agentPort: number;
  tickMs?: number;
  electionTick?: number;
  snapshotEntries?: number;
  healthIntervalMs?: number;
  machineDeadAfterMs?: number;
  /** Mutual TLS files (default: the test PKI's, test/helpers/pki.ts), or plaintext links. */
  tls?: { ca: string; cert: string; key: string };
  insecure?: boolean;
  /**
   * Emit and the console over plain HTTP: true by default here, so the fixtures' clients
   * (http://member) stay as they are; test/manager/https-emit.test.ts sets false to test HTTPS.
   */
  plainHttp?: boolean;
  /** The HTTPS listener's own certificate (default: the member's tls one). */
  https?: { cert: string; key: string };
  /** Full backups' MB/s per shard stream (tests slow it to act while a backup is under way). */
  backupPvLimitMb?: number;
  /** How full backups are stored (default zstd); 'none' takes sets as they were before compression. */
  backupCompression?: 'zstd' | 'none';
  /** Emit's limits (0 = no rate limit): the fuzzer lifts the rate, the limits test lowers it. */
  emitRatePerSecond?: number;
  emitRateBurst?: number;
  maxJobsPerCluster?: number;
  /** 'debug' logs what tests may wait for as evidence (a forwarded submission answered, a Raft peer unreachable). */
  logLevel?: 'debug' | 'info';
  /** Leader loops that act on instances (the fuzz slows them to once an hour: no engine runs there). */
  reconcileIntervalMs?: number;
  failureDetectIntervalMs?: number;
  binlogArchiveIntervalMs?: number;
  rollbackRetryIntervalMs?: number;
}

export class ManagerProcess extends ManagedProcess {
  constructor(readonly spec: ManagerSpec, readonly dataDir: string) {
    mkdirSync(dataDir, { recursive: true });
    const configFile = path.join(dataDir, 'manager.json');
    const { member, ...rest } = spec;
    const tls = rest.insecure || rest.tls ? {} : managerTls(member);
    writeFileSync(configFile, JSON.stringify({ member, dataDir: path.join(dataDir, 'data'), logLevel: 'info', tokens: testTokenConfig(), secretsKeyFile: testSecretsKeyFile(), plainHttp: true, ...tls, ...rest }, null, 2));
    super(`manager ${member}`, [MANAGER_MAIN, '--config', configFile], path.join(dataDir, 'manager.log'));
  }

  get member(): string {
    return this.spec.member;
  }
}

export class AgentProcess extends ManagedProcess {
  constructor(readonly host: string, readonly port: number, readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    super(`agent ${host}`, [AGENT_MAIN, '--host', host, '--port', String(port), '--state-dir', path.join(dir, 'state'), ...agentTlsArgs(host)], path.join(dir, 'agent.log'));
  }

  /** The agent's own pid as it logs it (the same as `pid`: no wrapper process). */
  async listeningPid(timeoutMs = 30_000): Promise<number> {
    return waitFor(`${this.name} to listen`, () => this.logLines().find((l) => l.msg === 'agent listening')?.pid as number | undefined, timeoutMs, 200);
  }
}

/**
 * Every process a test started, so afterAll (and an unexpected exit of the test process)
 * can kill them all, including stopped ones.
 */
export class ProcessSet {
  readonly all: ManagedProcess[] = [];
  private readonly onExit = () => {
    for (const p of this.all) if (p.running) p.pid && process.kill(p.pid, 'SIGKILL');
  };

  constructor() {
    process.once('exit', this.onExit);
  }

  add<T extends ManagedProcess>(p: T): T {
    this.all.push(p);
    return p;
  }

  async killAll(): Promise<void> {
    await Promise.all(this.all.map((p) => p.kill()));
    process.off('exit', this.onExit);
  }
}

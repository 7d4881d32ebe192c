// Starts, kills and restarts raft-kv server processes (server.ts) on loopback addresses,
// for the benchmark, the kill test and the soak. Every member's data dir (and its stderr
// log, `server.log`) lives under one base dir that stop() removes when the cluster made it.

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { KvSession } from './kv-client';
import type { StatusReply } from './kv-proto';
import type { ServerConfig } from './server';

const serverPath = fileURLToPath(new URL('./server.ts', import.meta.url));

export interface KvClusterOptions {
  /** One loopback address per member, e.g. ['127.0.0.11', '127.0.0.12', '127.0.0.13']. */
  hosts: string[];
  raftPort: number;
  kvPort: number;
  /** Parent of the members' data dirs; a fresh temp dir (removed by stop()) when absent. */
  baseDir?: string;
  tickMs?: number;
  electionTick?: number;
  snapshotEntries?: number;
  /**
   * Keep one server process booted and waiting, so a restart costs opening the storage
   * rather than a Node + TypeScript boot (the kill test). Off by default: an idle spare
   * booting next to a benchmark steals CPU from it.
   */
  warmStandby?: boolean;
  /** Node flags for the member processes; default: RAFT_KV_NODE_ARGS split on spaces. */
  nodeArgs?: string[];
  /** Mutual TLS files of the members (one manager certificate naming every host); plaintext when absent. */
  tls?: ServerConfig['tls'];
}

export interface Member {
  index: number;
  id: string;
  kv: string;
  dataDir: string;
  process: ChildProcess | undefined;
  /** A long-lived client session to this member's Kv service. */
  session: KvSession;
}

const liveChildren = new Set<ChildProcess>();
const ownedBaseDirs = new Set<string>();
let exitHookInstalled = false;

/** Whatever happens to the parent, no server process outlives it. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of liveChildren) child.kill('SIGKILL');
    for (const dir of ownedBaseDirs) rmSync(dir, { recursive: true, force: true });
  });
}

export class KvCluster {
  readonly members: Member[];
  private readonly ownsBaseDir: boolean;
  /** A server process that loaded its modules and waits on stdin for a configuration. */
  private spare: ChildProcess | undefined;
  readonly baseDir: string;

  private constructor(private readonly opts: KvClusterOptions) {
    this.ownsBaseDir = opts.baseDir === undefined;
    this.baseDir = opts.baseDir ?? mkdtempSync(join(tmpdir(), 'raft-kv-'));
    if (this.ownsBaseDir) ownedBaseDirs.add(this.baseDir);
    this.members = opts.hosts.map((host, index) => {
      const kv = `${host}:${opts.kvPort}`;
      return {
        index,
        id: `${host}:${opts.raftPort}`,
        kv,
        dataDir: join(this.baseDir, `member-${index + 1}`),
        process: undefined,
        session: new KvSession(kv),
      };
    });
  }

  /** Starts every member and waits until each serves its Kv port. */
  static async start(opts: KvClusterOptions): Promise<KvCluster> {
    installExitHook();
    const cluster = new KvCluster(opts);
    try {
      await Promise.all(cluster.members.map((m) => cluster.startMember(m.index)));
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** (Re)starts one member on its existing data dir; resolves once it prints READY. */
  async startMember(index: number, timeoutMs = 30_000): Promise<void> {
    const m = this.members[index];
    if (m.process) throw new Error(`member ${m.id} is already running`);
    mkdirSync(m.dataDir, { recursive: true });
    const config: ServerConfig = {
      id: m.id,
      kv: m.kv,
      dataDir: m.dataDir,
      members: Object.fromEntries(this.members.map((x) => [x.id, x.kv])),
      tickMs: this.opts.tickMs,
      electionTick: this.opts.electionTick,
      snapshotEntries: this.opts.snapshotEntries,
      tls: this.opts.tls,
    };
    const child = this.takeSpare();
    child.stdin!.end(`${JSON.stringify(config)}\n`);
    if (this.opts.warmStandby) this.spare = spawnSpare(this.opts.nodeArgs); // the next restart finds a warm process
    m.process = child;
    child.stderr!.pipe(createWriteStream(join(m.dataDir, 'server.log'), { flags: 'a' }));
    let stderrTail = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString()).slice(-4_000);
    });
    child.once('exit', () => {
      if (m.process === child) m.process = undefined;
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`member ${m.id} not ready within ${timeoutMs} ms`)), timeoutMs);
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        if (!line.startsWith('READY ')) return;
        clearTimeout(timer);
        resolve();
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`member ${m.id} exited before ready (code ${code}, signal ${signal}):\n${stderrTail}`));
      });
    });
  }

  private takeSpare(): ChildProcess {
    const spare = this.spare && this.spare.exitCode === null && this.spare.signalCode === null ? this.spare : spawnSpare(this.opts.nodeArgs);
    this.spare = undefined;
    return spare;
  }

  /** Sends `signal` to a member and waits for the process to be gone. */
  async kill(index: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.members[index].process;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
  }

  isRunning(index: number): boolean {
    return this.members[index].process !== undefined;
  }

  /** Status of every member; undefined for a member that is down or did not answer. */
  async statuses(timeoutMs = 1_000): Promise<(StatusReply | undefined)[]> {
    return Promise.all(
      this.members.map((m) => (m.process ? m.session.status(timeoutMs).catch(() => undefined) : Promise.resolve(undefined))),
    );
  }

  /** Polls until a running member says it is the leader; returns its index. */
  async waitForLeader(timeoutMs = 20_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const statuses = await this.statuses(500);
      const leader = statuses.findIndex((s) => s?.role === 'leader');
      if (leader >= 0) return leader;
      await sleep(50);
    }
    throw new Error(`no leader within ${timeoutMs} ms`);
  }

  /**
   * Makes member `index` the leader (Raft leadership transfer from the current leader)
   * and waits until every running member agrees.
   */
  async moveLeader(index: number, timeoutMs = 20_000): Promise<void> {
    const target = this.members[index].id;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const statuses = await this.statuses(500);
      if (statuses.every((s) => s === undefined || s.leader === target) && statuses[index]?.role === 'leader') return;
      const leader = statuses.findIndex((s) => s?.role === 'leader');
      if (leader >= 0 && leader !== index) await this.members[leader].session.transferLeader(target).catch(() => undefined);
      await sleep(100);
    }
    throw new Error(`member ${target} did not become the leader within ${timeoutMs} ms`);
  }

  /** SIGTERM every member (SIGKILL after 5 s), close the client sessions, remove the temp dir we made. */
  async stop(): Promise<void> {
    await Promise.all(
      this.members.map(async (m) => {
        const child = m.process;
        if (!child) return;
        const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await this.kill(m.index, 'SIGTERM');
        clearTimeout(force);
      }),
    );
    this.spare?.kill('SIGKILL');
    this.spare = undefined;
    for (const m of this.members) m.session.close();
    if (this.ownsBaseDir) {
      rmSync(this.baseDir, { recursive: true, force: true });
      ownedBaseDirs.delete(this.baseDir);
    }
  }
}

/** Extra node flags for the servers, e.g. RAFT_KV_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile them. */
const extraNodeArgs = (process.env.RAFT_KV_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0);

function spawnSpare(nodeArgs = extraNodeArgs): ChildProcess {
  const args = [...nodeArgs, '--import', 'tsx', serverPath, '--standby'];
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  return child;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

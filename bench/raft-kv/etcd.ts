// The reference: a 3-member etcd (Debian's etcd-server 3.4, /usr/bin/etcd) on loopback,
// driven through the `etcd3` npm client, one client per member.

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { sleep } from './cluster';

export const ETCD_BINARY = '/usr/bin/etcd';

export function etcdAvailable(): boolean {
  return existsSync(ETCD_BINARY);
}

export class EtcdCluster {
  readonly clients: Etcd3[];
  private readonly processes: ChildProcess[] = [];

  /** The members' process ids, in member order. */
  pids(): (number | undefined)[] {
    return this.processes.map((p) => p.pid);
  }
  private readonly baseDir = mkdtempSync(join(tmpdir(), 'raft-kv-etcd-'));

  private constructor(private readonly hosts: string[]) {
    this.clients = hosts.map((h) => new Etcd3({ hosts: `http://${h}:2379`, dialTimeout: 5_000 }));
  }

  /** Starts one etcd per host (client port 2379, peer port 2380) and waits until a put succeeds. */
  static async start(hosts: string[]): Promise<EtcdCluster> {
    const cluster = new EtcdCluster(hosts);
    process.on('exit', () => cluster.killAll());
    const initialCluster = hosts.map((h, i) => `e${i + 1}=http://${h}:2380`).join(',');
    hosts.forEach((host, i) => {
      const dataDir = join(cluster.baseDir, `e${i + 1}`);
      mkdirSync(dataDir, { recursive: true });
      const child = spawn(
        ETCD_BINARY,
        [
          `--name=e${i + 1}`,
          `--data-dir=${dataDir}`,
          `--listen-client-urls=http://${host}:2379`,
          `--advertise-client-urls=http://${host}:2379`,
          `--listen-peer-urls=http://${host}:2380`,
          `--initial-advertise-peer-urls=http://${host}:2380`,
          `--initial-cluster=${initialCluster}`,
          '--initial-cluster-state=new',
          '--initial-cluster-token=raft-kv-bench',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      child.stderr!.pipe(createWriteStream(join(dataDir, 'etcd.log')));
      cluster.processes.push(child);
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await cluster.clients[0].put('raft-kv-bench/warmup').value('x');
        return cluster;
      } catch (err) {
        if (Date.now() > deadline) {
          await cluster.stop();
          throw new Error(`etcd did not accept a put within 30 s: ${String(err)}`);
        }
        await sleep(200);
      }
    }
  }

  async put(member: number, key: string, value: Uint8Array): Promise<boolean> {
    try {
      await this.clients[member].put(key).value(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Makes member `index` (named e<index+1>) the leader with etcd's MoveLeader, sent to
   * the current leader, and waits until every member reports it.
   */
  async moveLeader(index: number, timeoutMs = 20_000): Promise<void> {
    const { members } = await this.clients[0].cluster.memberList({});
    const target = members.find((m) => m.name === `e${index + 1}`);
    if (!target) throw new Error(`etcd member e${index + 1} not found`);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const statuses = await Promise.all(this.clients.map((c) => c.maintenance.status().catch(() => undefined)));
      if (statuses.every((s) => s?.leader === target.ID)) return;
      const leader = statuses.findIndex((s) => s !== undefined && s.leader === s.header.member_id);
      if (leader >= 0) await this.clients[leader].maintenance.moveLeader({ targetID: target.ID }).catch(() => undefined);
      await sleep(100);
    }
    throw new Error(`etcd member e${index + 1} did not become the leader within ${timeoutMs} ms`);
  }

  /** WAL fsyncs so far, from each member's Prometheus metrics: the leader's and the sum; which member leads (-1: none). */
  async fsyncCounts(): Promise<{ leader: number; total: number; leaderIndex: number }> {
    let leader = 0;
    let total = 0;
    let leaderIndex = -1;
    for (const [i, host] of this.hosts.entries()) {
      const text = await (await fetch(`http://${host}:2379/metrics`)).text();
      const count = metricValue(text, 'etcd_disk_wal_fsync_duration_seconds_count');
      total += count;
      if (metricValue(text, 'etcd_server_is_leader') === 1) {
        leader = count;
        leaderIndex = i;
      }
    }
    return { leader, total, leaderIndex };
  }

  /** The most leader changes any member has seen (etcd_server_leader_changes_seen_total). */
  async leaderChangesSeen(): Promise<number> {
    let most = 0;
    for (const host of this.hosts) {
      const text = await (await fetch(`http://${host}:2379/metrics`)).text();
      most = Math.max(most, metricValue(text, 'etcd_server_leader_changes_seen_total'));
    }
    return most;
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.close();
    await Promise.all(
      this.processes.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.kill('SIGTERM');
            setTimeout(() => p.kill('SIGKILL'), 5_000).unref();
          }),
      ),
    );
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  private killAll(): void {
    for (const p of this.processes) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    rmSync(this.baseDir, { recursive: true, force: true });
  }
}

function metricValue(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

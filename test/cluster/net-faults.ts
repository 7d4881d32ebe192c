// Network faults for the HA tests on loopback: iptables rules added and always removed
// (every rule added is remembered and removeAll() in afterAll takes away what a failed
// test left), and a cgroup v2 group for the test process itself, so that a rule can match
// only this process's traffic (the in-process manager) and not the agents' or engines'.

import { execFile } from 'node:child_process';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const CGROUP2_ROOT = '/sys/fs/cgroup/unified';

export class NetFaults {
  private readonly rules: string[][] = [];
  private group: string | undefined;

  /**
   * Cuts `hostaddr` off as a network partition of that host would: every packet to it and
   * every packet from it is dropped, except what it sends itself (a client bound to that
   * address still reaches the host's own servers, as a process on the host would).
   */
  async isolate(hostaddr: string): Promise<void> {
    await this.add(['-d', hostaddr, '!', '-s', hostaddr, '-j', 'DROP']);
    await this.add(['-s', hostaddr, '!', '-d', hostaddr, '-j', 'DROP']);
  }

  /** Drops, in OUTPUT, every packet to `hostaddr` (that host is cut off from everyone on this machine). */
  async dropTo(hostaddr: string): Promise<void> {
    await this.add(['-d', hostaddr, '-j', 'DROP']);
  }

  /**
   * Puts this process in a cgroup of its own. Call it before this process opens the sockets
   * a rule must match: a socket keeps the cgroup it was created in. Children spawned after
   * inherit it; give them back with releaseToRoot.
   */
  async joinOwnGroup(): Promise<void> {
    await this.ownGroup();
  }

  /** Moves another process (an agent this test spawned) back to the root cgroup. */
  async releaseToRoot(pid: number): Promise<void> {
    await writeFile(path.join(CGROUP2_ROOT, 'cgroup.procs'), String(pid));
  }

  /** Drops only what this process's sockets (those opened after joinOwnGroup) send to `hostaddr`. */
  async dropFromThisProcessTo(hostaddr: string): Promise<void> {
    const group = await this.ownGroup();
    await this.add(['-d', hostaddr, '-m', 'cgroup', '--path', group, '-j', 'DROP']);
  }

  async removeAll(): Promise<void> {
    while (this.rules.length > 0) {
      const rule = this.rules.pop()!;
      await run('iptables', ['-D', 'OUTPUT', ...rule]).catch(() => {});
    }
    if (this.group) {
      // Back to the root group, then the group can go.
      await writeFile(path.join(CGROUP2_ROOT, 'cgroup.procs'), String(process.pid)).catch(() => {});
      await rmdir(path.join(CGROUP2_ROOT, this.group)).catch(() => {});
      this.group = undefined;
    }
  }

  private async add(rule: string[]): Promise<void> {
    await run('iptables', ['-I', 'OUTPUT', ...rule]);
    this.rules.push(rule);
  }

  private async ownGroup(): Promise<string> {
    if (this.group) return this.group;
    const name = `kcm-test-${process.pid}`;
    await mkdir(path.join(CGROUP2_ROOT, name), { recursive: true });
    await writeFile(path.join(CGROUP2_ROOT, name, 'cgroup.procs'), String(process.pid));
    this.group = name;
    return name;
  }
}

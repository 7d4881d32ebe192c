// Leader-only: keeps each machine's host facts (free disk of every directory its registration
// names, memory, cores, engines installed) current, so placement decides on what the host has
// now, not on what it had at create_machine. Issue 35: a machine registered with 300 MB free
// and grown to 1.1 GB was still refused minutes later, and one filled to 20 MB after its
// registration still passed placement and failed its install.
//
// Every interval it asks each registered host's agent for its facts (HostFacts, a few hosts at
// a time; hosts the health monitor hears nothing from are skipped) and commits
// MachineFactsMeasured only for a host whose facts changed enough to matter (factsChange):
// free disk moves all the time, and a commit per host per round would fill the Raft log.

import { eachAtMost, type Logger } from '@kcm/common';
import type { WithAgent } from '@kcm/agent-api';
import { CommandKind } from '../meta/commands';
import { machinesOfHost, registrationDirs } from '../meta/machines';
import type { HostFacts } from '../meta/state';
import type { MetaStore } from '../meta/store';
import { PeriodicRounds } from './periodic-rounds';
import { factsFromAgent } from '../jobs/machines';

export const DEFAULT_HOST_FACTS_INTERVAL_MS = 30_000;
/** Hosts asked at once in a round. */
const CONCURRENT_CALLS = 8;

const MiB = 2 ** 20;
/**
 * A directory's free space is recorded again when it moved by at least this share of what
 * is recorded, and at least MIN_DISK_CHANGE_BYTES: near-full disks are followed closely
 * (a round that measured a disk half-way through filling, at 71 MB, must still record the
 * 20 MB it ends at), large ones coarsely (a 5% error on 10 TB places or refuses no node).
 */
export const DISK_CHANGE_SHARE = 0.05;
export const MIN_DISK_CHANGE_BYTES = 16 * MiB;
/** Memory is recorded again when it moved by this share (a resized VM, not page-cache noise). */
export const MEMORY_CHANGE_SHARE = 0.05;

export interface HostFactsRefresherOptions {
  store: MetaStore;
  withAgent: WithAgent;
  logger: Logger;
  intervalMs?: number;
  /** False for a host whose agent the health monitor does not hear: not asked this round. */
  reachable?: (hostaddr: string) => boolean;
  now?: () => number;
}

export class HostFactsRefresher {
  private readonly loop: PeriodicRounds;
  /** MachineFactsMeasured commits by this member (tests, logs). */
  recorded = 0;

  constructor(private readonly opts: HostFactsRefresherOptions) {
    this.loop = new PeriodicRounds(() => this.round(), opts.intervalMs ?? DEFAULT_HOST_FACTS_INTERVAL_MS);
  }

  start(): void {
    this.loop.start({ runAtOnce: true });
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round over every registered host; a round under way is joined, not doubled. */
  refreshAll(): Promise<void> {
    return this.loop.run();
  }

  private async round(): Promise<void> {
    const hosts = [...new Set(Object.values(this.opts.store.state().machines).map((m) => m.hostaddr))].filter((h) => this.opts.reachable?.(h) ?? true);
    await eachAtMost(CONCURRENT_CALLS, hosts, (hostaddr) => this.refresh(hostaddr));
  }

  private async refresh(hostaddr: string): Promise<void> {
    const dirs = [...new Set(machinesOfHost(this.opts.store.state(), hostaddr).flatMap(registrationDirs))];
    if (dirs.length === 0) return;
    let facts: HostFacts;
    try {
      facts = factsFromAgent(await this.opts.withAgent(hostaddr, (agent) => agent.hostFacts(dirs)));
    } catch (err) {
      // The health monitor reports an agent that does not answer; the facts stay as recorded.
      this.opts.logger.debug({ err, hostaddr }, 'host facts not measured');
      return;
    }
    // Read again: the host may have been removed, or its facts recorded, during the call.
    const records = machinesOfHost(this.opts.store.state(), hostaddr);
    const changes = records.map((m) => factsChange(m.facts, facts, registrationDirs(m))).filter((c) => c !== null);
    if (changes.length === 0) return;
    try {
      await this.opts.store.propose({ kind: CommandKind.MachineFactsMeasured, at: (this.opts.now ?? Date.now)(), hostaddr, facts });
      this.recorded++;
      this.opts.logger.info({ hostaddr, change: changes[0] }, 'host facts changed');
    } catch (err) {
      // Lost leadership or no quorum: the next leader's refresher measures again.
      this.opts.logger.debug({ err, hostaddr }, 'could not record host facts');
    }
  }
}

/**
 * What changed enough between the recorded facts and a new measurement to record it, in
 * words, or null: a directory's free space by at least DISK_CHANGE_SHARE of the recorded
 * value and MIN_DISK_CHANGE_BYTES (or measured for the first time), memory by
 * MEMORY_CHANGE_SHARE, any change of cores or of the engines installed.
 */
export function factsChange(recorded: HostFacts | null, measured: HostFacts, dirs: readonly string[]): string | null {
  if (!recorded) return 'no facts recorded';
  if (recorded.cores !== measured.cores) return `cores ${recorded.cores} -> ${measured.cores}`;
  if (Math.abs(measured.memoryMb - recorded.memoryMb) >= recorded.memoryMb * MEMORY_CHANGE_SHARE) return `memory ${recorded.memoryMb} MB -> ${measured.memoryMb} MB`;
  if (recorded.mariadbInstalled !== measured.mariadbInstalled || recorded.postgresInstalled !== measured.postgresInstalled) return 'engines installed';
  // Directory names came from clients: read through Maps, never by indexing.
  const before = new Map(Object.entries(recorded.freeDiskBytes));
  const now = new Map(Object.entries(measured.freeDiskBytes));
  for (const dir of dirs) {
    const was = before.get(dir);
    const is = now.get(dir);
    if (is === undefined) continue;
    if (was === undefined) return `${dir}: ${is} bytes free, first measured`;
    if (Math.abs(is - was) >= Math.max(MIN_DISK_CHANGE_BYTES, was * DISK_CHANGE_SHARE)) return `${dir}: ${was} -> ${is} bytes free`;
  }
  return null;
}


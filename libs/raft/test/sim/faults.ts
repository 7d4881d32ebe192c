// The fault schedule of one run, drawn step by step from the run's PRNG: partitions
// (symmetric, one-way, isolating the leader), crashes (at once, or at the next sync
// point so the written-but-unsynced tail is torn off), pauses longer than an election
// timeout, and changes of network weather. Every fault is undone on a schedule; after
// `chaosUntil` everything is healed so the cluster can show it still makes progress.

import type { NodeId } from '../../src/core/types';
import { calmNetwork, type Network, type NetworkConfig } from './network';
import type { Prng } from './prng';
import type { Trace } from './trace';

/** What the fault injector may do to the cluster. */
export interface FaultTarget {
  readonly nodeIds: readonly NodeId[];
  readonly network: Network;
  isUp(id: NodeId): boolean;
  isPaused(id: NodeId): boolean;
  /** The node that currently claims leadership with the highest term, if any. */
  currentLeader(): NodeId | null;
  /** `atNextSync`: crash after the next Ready is written but before it is synced. */
  crash(id: NodeId, atNextSync: boolean): void;
  restart(id: NodeId): void;
  pause(id: NodeId): void;
  resume(id: NodeId): void;
}

export interface FaultOptions {
  electionTick: number;
  /** Probability per tick that a new fault starts (0 disables faults). */
  faultRate: number;
  /** Relative weights of the fault kinds. */
  weights: Record<FaultKind, number>;
  /** Faults stop and everything heals at this tick. */
  chaosUntil: number;
  /** Upper bounds for the network weather of this run. */
  maxDropRate: number;
  maxDuplicateRate: number;
  maxDelay: number;
  /**
   * Targeted faults, aimed where Raft's rules matter most (a Jepsen-style nemesis):
   * the probability that a node is crashed within a few ticks of becoming leader, before
   * its first entries reach a quorum (the setting of the paper's figure 8) ...
   */
  killNewLeaderRate: number;
  /** ... and that a node reboots (down for 1-2 ticks) right after granting a vote. */
  rebootVoterRate: number;
}

export type FaultKind = 'partition' | 'isolate-leader' | 'one-way' | 'crash' | 'pause' | 'weather';

export const defaultWeights: Record<FaultKind, number> = {
  partition: 1,
  'isolate-leader': 1,
  'one-way': 1,
  crash: 2,
  pause: 1,
  weather: 1,
};

export const defaultFaultOptions = (electionTick: number, chaosUntil: number): FaultOptions => ({
  electionTick,
  faultRate: 0.04,
  weights: defaultWeights,
  chaosUntil,
  maxDropRate: 0.15,
  maxDuplicateRate: 0.1,
  maxDelay: 4,
  killNewLeaderRate: 0.05,
  rebootVoterRate: 0.02,
});

type Recovery = { at: number; what: string; run: () => void };

export class FaultInjector {
  private recoveries: Recovery[] = [];
  private healed = false;
  private _faults = 0;

  constructor(
    private readonly rng: Prng,
    private readonly target: FaultTarget,
    private readonly trace: Trace,
    private readonly opts: FaultOptions,
  ) {
    this.target.network.config = this.drawWeather();
  }

  get faultsInjected(): number {
    return this._faults;
  }

  /** Called once at the start of every tick, before messages are delivered. */
  step(now: number): void {
    this.runDueRecoveries(now);
    if (now >= this.opts.chaosUntil) {
      if (!this.healed) this.healEverything(now);
      return;
    }
    if (this.opts.faultRate > 0 && this.rng.chance(this.opts.faultRate)) this.injectOne(now);
  }

  private injectOne(now: number): void {
    const ids = this.target.nodeIds;
    const kind = this.pickKind();
    const liveIds = ids.filter((id) => this.target.isUp(id) && !this.target.isPaused(id));
    switch (kind) {
      case 'partition': {
        const shuffled = this.rng.shuffled(ids);
        const cut = this.rng.range(1, ids.length - 1);
        const groups = [shuffled.slice(0, cut), shuffled.slice(cut)];
        this.target.network.partition(groups);
        this.note(now, `partition ${groups.map((g) => g.join(',')).join(' | ')}`);
        this.scheduleHeal(now);
        return;
      }
      case 'isolate-leader': {
        const leader = this.target.currentLeader();
        if (!leader) return;
        this.target.network.partition([[leader], ids.filter((id) => id !== leader)]);
        this.note(now, `isolate leader ${leader}`);
        this.scheduleHeal(now);
        return;
      }
      case 'one-way': {
        const links: string[] = [];
        const n = this.rng.range(1, ids.length);
        for (let i = 0; i < n; i++) {
          const from = this.rng.pick(ids);
          const to = this.rng.pick(ids.filter((id) => id !== from));
          this.target.network.blockOneWay(from, to);
          links.push(`${from}>${to}`);
        }
        this.note(now, `block one-way ${links.join(' ')}`);
        this.scheduleHeal(now);
        return;
      }
      case 'crash': {
        // Leave at least one node running, and prefer the leader: that is where it hurts.
        if (liveIds.length <= 1) return;
        const id = this.pickVictim(liveIds);
        const atNextSync = this.rng.chance(0.5);
        this.target.crash(id, atNextSync);
        this.note(now, `crash ${id}${atNextSync ? ' at next sync' : ''}`);
        this.scheduleRestart(now, id);
        return;
      }
      case 'pause': {
        if (liveIds.length <= 1) return;
        const id = this.pickVictim(liveIds);
        this.target.pause(id);
        const e = this.opts.electionTick;
        const length = this.rng.range(2 * e, 6 * e);
        this.note(now, `pause ${id} for ${length}`);
        this.schedule(now + length, `resume ${id}`, () => {
          if (this.target.isPaused(id)) this.target.resume(id);
        });
        return;
      }
      case 'weather': {
        this.target.network.config = this.drawWeather();
        const c = this.target.network.config;
        this.note(now, `weather drop=${c.dropRate.toFixed(3)} dup=${c.duplicateRate.toFixed(3)} delay=${c.minDelay}-${c.maxDelay}`);
        return;
      }
    }
  }

  /** The cluster saw `id` become leader. */
  onBecameLeader(id: NodeId, now: number): void {
    if (!this.chaos(now) || !this.rng.chance(this.opts.killNewLeaderRate)) return;
    const at = now + this.rng.range(0, this.opts.electionTick);
    this.schedule(at, `kill new leader ${id}`, () => {
      if (!this.target.isUp(id) || this.liveCount() <= 1) return;
      this.target.crash(id, false);
      this.scheduleRestart(at, id);
    });
  }

  /** The cluster saw `id` send a granted vote. */
  onVoteGranted(id: NodeId, now: number): void {
    if (!this.chaos(now) || !this.rng.chance(this.opts.rebootVoterRate)) return;
    this.schedule(now + 1, `reboot voter ${id}`, () => {
      if (!this.target.isUp(id) || this.liveCount() <= 1) return;
      this.target.crash(id, false);
      const back = now + 1 + this.rng.range(1, 2);
      this.schedule(back, `restart ${id}`, () => {
        if (!this.target.isUp(id)) this.target.restart(id);
      });
    });
  }

  private chaos(now: number): boolean {
    return now < this.opts.chaosUntil && this.opts.faultRate > 0;
  }

  private liveCount(): number {
    return this.target.nodeIds.filter((id) => this.target.isUp(id) && !this.target.isPaused(id)).length;
  }

  private scheduleRestart(now: number, id: NodeId): void {
    // Short outages matter as much as long ones: a node back within a few ticks
    // still sees the messages of the term it crashed in.
    const downtime = this.rng.chance(0.5) ? this.rng.range(1, 8) : this.rng.range(10, 100);
    this.schedule(now + downtime, `restart ${id}`, () => {
      if (!this.target.isUp(id)) this.target.restart(id);
    });
  }

  private pickKind(): FaultKind {
    const kinds = Object.keys(this.opts.weights).sort() as FaultKind[];
    const total = kinds.reduce((sum, k) => sum + this.opts.weights[k], 0);
    let x = this.rng.float() * total;
    for (const k of kinds) {
      x -= this.opts.weights[k];
      if (x < 0) return k;
    }
    return kinds[kinds.length - 1];
  }

  private pickVictim(candidates: NodeId[]): NodeId {
    const leader = this.target.currentLeader();
    if (leader && candidates.includes(leader) && this.rng.chance(0.5)) return leader;
    return this.rng.pick(candidates);
  }

  private drawWeather(): NetworkConfig {
    const o = this.opts;
    const maxDelay = this.rng.range(0, o.maxDelay);
    return {
      dropRate: this.rng.float() * o.maxDropRate,
      duplicateRate: this.rng.float() * o.maxDuplicateRate,
      minDelay: this.rng.range(0, maxDelay),
      maxDelay,
    };
  }

  private scheduleHeal(now: number): void {
    const e = this.opts.electionTick;
    this.schedule(now + this.rng.range(e, 8 * e), 'heal partitions', () => this.target.network.heal());
  }

  private schedule(at: number, what: string, run: () => void): void {
    this.recoveries.push({ at, what, run });
  }

  private runDueRecoveries(now: number): void {
    const due = this.recoveries.filter((r) => r.at <= now);
    if (due.length === 0) return;
    this.recoveries = this.recoveries.filter((r) => r.at > now);
    // Scheduled in insertion order; stable sort keeps that for equal times.
    due.sort((a, b) => a.at - b.at);
    for (const r of due) {
      this.trace.record(now, `fault-end ${r.what}`);
      r.run();
    }
  }

  private healEverything(now: number): void {
    this.healed = true;
    this.recoveries = [];
    this.target.network.heal();
    this.target.network.config = { ...calmNetwork };
    for (const id of this.target.nodeIds) {
      if (!this.target.isUp(id)) this.target.restart(id);
      else if (this.target.isPaused(id)) this.target.resume(id);
    }
    this.trace.record(now, 'heal everything');
  }

  private note(now: number, what: string): void {
    this._faults++;
    this.trace.record(now, `fault ${what}`);
  }
}

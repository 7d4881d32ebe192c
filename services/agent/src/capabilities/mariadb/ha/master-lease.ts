// Fencing by lease, the agent's half (the leader's half: services/manager/src/leader/master-leases.ts).
//
// The leader renews its lease on each shard master of this host every detector interval
// (RenewMasterLeases), naming the master's standbys. When a lease runs out (the managers
// are gone or cut off) the master may keep serving only while this host reaches every one
// of its standbys: then no standby can have lost it, and the failure detector, which fails
// over only when every standby that answers lost the master, will not replace it. When
// this host reaches not all of them, the master is fenced here and now: killed, kept
// stopped, read-only on any later start (ha.ts killFenced). A failover of a master whose
// agent cannot be reached waits until the lease must have run out before it promotes; so
// once a replacement takes writes, the old master cannot acknowledge one.
//
// A lease ends lease_ms after the renewal was sent: its age on arrival (by this host's
// clock against the leader's sent_at_ms, kept within the leader's margin by NTP) is taken
// off, a renewal older than its lease renews nothing, and the end is kept on this process's
// monotonic clock. The leader counts from before it sent, so its view of the end is never
// earlier than the agent's by more than the clocks' difference.
//
// After an agent restart every master named by the last renewal (kept in the state dir)
// gets one lease from the agent's start: long enough for the leader's next renewal, and for
// the standbys of a whole restarted fleet (kcm local up) to come back before they are looked
// for. That lease may end later than the leader counts it, but a master can acknowledge a
// write only with a standby's ack (semi-sync never falls back), and a master that reaches a
// standby is not the one being replaced. A master that is down is not fenced: it can
// acknowledge nothing, and if it is started while its lease is out, the next look fences it.

import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@kcm/common';
import { AgentFailure, type MariaDbLeaseRenewal, type MariaDbLeaseReply } from '@kcm/agent-api';
import { mariadbGreets } from './ha-status';

/** How often the agent looks at its leases (ms). */
export const LEASE_CHECK_MS = 200;
/** How long a standby's mariadbd gets to send its greeting (ms): it is reachable when it does. */
export const STANDBY_REACH_MS = 300;
const MAX_LEASE_MS = 60_000;
/** The lease a master named by the last renewal gets from an agent's start (ms). */
export const RESTORED_LEASE_MS = 3_000;

export type InstanceRole = 'writable' | 'read-only' | 'down' | 'unknown';

export interface MasterLeaseDeps {
  stateDir: string;
  logger: Logger;
  /** This host's address: the reach check connects from it (on loopback hosts, the source address is the host). */
  hostaddr: string;
  /** The instance's role as it answers now (read_only), 'down' when no mariadbd runs, 'unknown' when it does not answer. */
  roleOf(port: number): Promise<InstanceRole>;
  /** Fences the instance: killed, kept stopped, read-only on a later start. */
  fence(port: number, why: string): Promise<void>;
  /** Monotonic ms (tests). */
  now?: () => number;
  /** Wall-clock ms since the epoch (tests): a renewal older than its lease by this clock is ignored. */
  wallClock?: () => number;
  /** Whether a MariaDB server at host:port greets within ms (tests). */
  reachable?: (host: string, port: number, ms: number) => Promise<boolean>;
}

interface Lease {
  endsAt: number;
  standbys: string[];
  /** The lease ran out while every standby was reachable (logged once). */
  heldByStandbys: boolean;
}

export class MasterLeases {
  private readonly leases = new Map<number, Lease>();
  private readonly fenced = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private persisted = '';

  constructor(private readonly deps: MasterLeaseDeps) {}

  private now(): number {
    return (this.deps.now ?? (() => performance.now()))();
  }

  private get file(): string {
    return path.join(this.deps.stateDir, 'master-leases.json');
  }

  /** Loads the masters of the last renewal, each with a lease from now, and starts looking every LEASE_CHECK_MS. */
  async start(): Promise<void> {
    const raw = await readFile(this.file, 'utf8').catch(() => '');
    if (raw) {
      try {
        const kept = JSON.parse(raw) as { port: number; standbys: string[] }[];
        const endsAt = this.now() + RESTORED_LEASE_MS;
        for (const m of kept) if (Number.isInteger(m.port) && Array.isArray(m.standbys)) this.leases.set(m.port, { endsAt, standbys: m.standbys.map(String), heldByStandbys: false });
        this.persisted = raw;
      } catch (err) {
        this.deps.logger.error({ err, file: this.file }, 'master leases file unreadable: starting without leases');
      }
    }
    this.timer = setInterval(() => void this.check(), LEASE_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** A renewal: every master named gets lease_ms from now; a port not named is no master here any more. */
  async renew(req: MariaDbLeaseRenewal): Promise<MariaDbLeaseReply> {
    if (!(Number.isInteger(req.lease_ms) && req.lease_ms > 0 && req.lease_ms <= MAX_LEASE_MS)) {
      throw new AgentFailure('invalid_argument', `lease_ms ${req.lease_ms} must be an integer in 1..${MAX_LEASE_MS}`);
    }
    const age = (this.deps.wallClock ?? Date.now)() - req.sent_at_ms;
    if (age > req.lease_ms) {
      // Held up on the way (a healed partition delivers it late): the leader may have counted this lease out.
      this.deps.logger.warn({ age_ms: age, lease_ms: req.lease_ms }, 'master lease renewal arrived too late: ignored');
      return { fenced_ports: [...this.fenced] };
    }
    const named = new Set<number>();
    for (const m of req.masters) {
      if (!(Number.isInteger(m.port) && m.port > 0 && m.port < 65_536)) throw new AgentFailure('invalid_argument', `port ${m.port} is not a port`);
      named.add(m.port);
    }
    // Counted from when it was sent as far as this clock can tell (hosts' clocks are kept
    // within the leader's margin by NTP): a renewal that spent time on the way renews less.
    const endsAt = this.now() + req.lease_ms - Math.max(0, age);
    for (const port of [...this.leases.keys()]) if (!named.has(port)) this.leases.delete(port);
    for (const port of [...this.fenced]) if (!named.has(port)) this.fenced.delete(port);
    for (const m of req.masters) {
      // One this agent fenced stays fenced: only a failover or a rejoin gives it a role again.
      if (this.fenced.has(m.port)) continue;
      const before = this.leases.get(m.port);
      if (before?.heldByStandbys) this.deps.logger.info({ port: m.port }, 'master lease renewed again');
      this.leases.set(m.port, { endsAt, standbys: [...m.standbys], heldByStandbys: false });
    }
    await this.persist();
    return { fenced_ports: [...this.fenced].filter((p) => named.has(p)) };
  }

  /** One look at every lease now (tests; the timer calls it too). A look under way is joined. */
  check(): Promise<void> {
    this.checking ??= this.checkOnce().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async checkOnce(): Promise<void> {
    const now = this.now();
    for (const [port, lease] of [...this.leases]) {
      if (lease.endsAt > now) continue;
      try {
        await this.ranOut(port, lease);
      } catch (err) {
        this.deps.logger.error({ err, port }, 'master lease check failed');
      }
    }
  }

  private async ranOut(port: number, lease: Lease): Promise<void> {
    const reach = this.deps.reachable ?? ((host: string, p: number, ms: number) => mariadbGreets(host, p, ms, this.deps.hostaddr));
    // In parallel: a hung mariadbd takes its connect timeout to answer, and the leader's wait is bounded.
    const [role, views] = await Promise.all([
      this.deps.roleOf(port),
      Promise.all(lease.standbys.map(async (s) => ({ s, ok: await reachOf(reach, s) }))),
    ]);
    if (role === 'read-only') {
      // A standby now (a switch the leader did not get to tell): nothing to fence.
      this.leases.delete(port);
      return;
    }
    if (role === 'down') return; // it acknowledges nothing; looked at again next time
    const lost = views.filter((v) => !v.ok).map((v) => v.s);
    if (lost.length === 0) {
      if (!lease.heldByStandbys) this.deps.logger.warn({ port, standbys: lease.standbys }, 'master lease ran out (no word from the managers); every standby is reachable, so it keeps serving');
      lease.heldByStandbys = true;
      return;
    }
    const why = `its lease ran out (no word from the managers) and this host does not reach standby ${lost.join(', ')}`;
    // Fenced before it is forgotten: a failed fence is tried again at the next look.
    await this.deps.fence(port, why);
    this.leases.delete(port);
    this.fenced.add(port);
    this.deps.logger.error({ port, role, standbys_lost: lost }, `master fenced by its agent: ${why}`);
  }

  private async persist(): Promise<void> {
    const text = JSON.stringify([...this.leases].map(([port, l]) => ({ port, standbys: l.standbys })).sort((a, b) => a.port - b.port));
    if (text === this.persisted) return;
    await writeFile(`${this.file}.tmp`, text, { mode: 0o600 });
    await rename(`${this.file}.tmp`, this.file);
    this.persisted = text;
  }
}

function reachOf(reach: (host: string, port: number, ms: number) => Promise<boolean>, endpoint: string): Promise<boolean> {
  const at = endpoint.lastIndexOf(':');
  const host = endpoint.slice(0, at);
  const port = Number(endpoint.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port)) return Promise.resolve(false);
  return reach(host, port, STANDBY_REACH_MS);
}

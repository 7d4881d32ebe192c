// Safety checks of the kill scenario that look at the members themselves rather than at
// client results: terms never go back, and no member votes twice in a term.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KvCluster } from './cluster';
import type { HardStateLogLine } from './server';

/**
 * Reads every member's `hardstate.log` (one line per persisted (term, vote) change, plus
 * the state found on each start) and reports:
 * - a persisted term lower than one persisted before it (across restarts included),
 * - two different votes persisted in the same term,
 * - a restart that found a lower term, or the same term without the vote persisted in it
 *   (a vote lost by storage: the member could vote again in that term).
 */
export function checkHardStateLogs(cluster: KvCluster): { violations: string[]; votesLogged: number; restarts: number } {
  const violations: string[] = [];
  let votesLogged = 0;
  let restarts = 0;
  for (const m of cluster.members) {
    const path = join(m.dataDir, 'hardstate.log');
    if (!existsSync(path)) continue;
    const lines = readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as HardStateLogLine);
    const voteInTerm = new Map<number, string>();
    let last: HardStateLogLine | undefined;
    for (const line of lines) {
      if (line.start) restarts++;
      if (last && line.term < last.term) {
        violations.push(`${m.id}: term went back from ${last.term} to ${line.term}${line.start ? ' across a restart' : ''}`);
      }
      if (line.start && last && line.term === last.term && last.vote !== null && line.vote !== last.vote) {
        violations.push(`${m.id}: restarted in term ${line.term} with vote ${line.vote} but had persisted vote ${last.vote}`);
      }
      if (line.vote !== null) {
        const earlier = voteInTerm.get(line.term);
        if (earlier !== undefined && earlier !== line.vote) {
          violations.push(`${m.id}: voted for ${earlier} and for ${line.vote} in term ${line.term}`);
        }
        if (earlier === undefined && !line.start) votesLogged++;
        voteInTerm.set(line.term, line.vote);
      }
      last = line;
    }
  }
  return { violations, votesLogged, restarts: Math.max(0, restarts - cluster.members.length) };
}

/**
 * Polls every member's status and records any term that is lower than one the same
 * process reported before (the in-memory term must be monotonic within a process; across
 * restarts the persisted log above is the judge, since a term the core adopted but had not
 * yet persisted is legitimately gone after a SIGKILL).
 */
export class TermMonitor {
  readonly violations: string[] = [];
  private readonly lastTermByPid = new Map<number, { id: string; term: number }>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  maxTerm = 0;

  constructor(
    private readonly cluster: KvCluster,
    private readonly intervalMs = 100,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.poll(), this.intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      for (const s of await this.cluster.statuses(500)) {
        if (!s) continue;
        this.maxTerm = Math.max(this.maxTerm, s.term);
        const before = this.lastTermByPid.get(s.pid);
        if (before && s.term < before.term) this.violations.push(`${s.id} (pid ${s.pid}): term went back from ${before.term} to ${s.term}`);
        this.lastTermByPid.set(s.pid, { id: s.id, term: s.term });
      }
    } finally {
      this.polling = false;
    }
  }
}

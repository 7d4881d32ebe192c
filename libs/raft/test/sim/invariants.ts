// The Raft safety properties (paper figure 3), checked from the outside on every step.
// The checker never trusts the core's own bookkeeping: it looks at roles and terms the
// nodes report, the entries their storage made durable, and the entries they applied.
//
// - Election safety: at most one leader per term, over the whole run.
// - Log matching: an (index, term) pair names one entry and one prefix. Every entry
//   made durable anywhere is recorded with its content and its predecessor's term; by
//   induction on the index, agreeing on (content, previous term) for every (index, term)
//   is the same as "same index and term implies identical prefixes" across all logs.
//   A direct pairwise comparison of the durable logs (checkLogsPairwise) backs it up.
// - Leader completeness: an entry committed in term T is in the log of every leader of
//   a term > T. The commit term of an entry is taken as the lowest term of any node seen
//   applying it; that is never below the real one, so the check can miss, never lie.
// - State-machine safety: no two nodes apply different entries at the same index.
// - The commit rule behind leader completeness (section 5.4.2, figure 8): a leader moves
//   its commit index only onto an entry of its own term; older entries commit
//   indirectly. Breaking it is only *visible* as lost data after a rare chain of
//   crashes, so it is also checked directly, from the outside: whenever a leader's
//   persisted commit index moves, the entry it moved onto must carry the leader's term.

import type { Entry, NodeId } from '../../src/core/types';

export type InvariantName =
  | 'election safety'
  | 'log matching'
  | 'leader completeness'
  | 'state machine safety'
  | 'leader commit rule';

export interface Violation {
  invariant: InvariantName;
  detail: string;
}

/** A read-only view of one node's log, as the checker needs it. */
export interface LogView {
  /** Term of entry `index`, undefined if it is not in the log; compacted entries report 'compacted'. */
  termAt(index: number): number | 'compacted' | undefined;
}

interface RecordedEntry {
  contentKey: string;
  prevTerm: number | undefined;
  by: NodeId;
}

interface CommittedEntry {
  term: number;
  contentKey: string;
  /** Lowest term of a node seen applying it (>= the term it was really committed in). */
  commitTerm: number;
  by: NodeId;
}

export class SafetyChecker {
  readonly violations: Violation[] = [];

  /** `checkCommitRule: false` leaves only the paper's four properties (to measure what they catch alone). */
  constructor(private readonly opts: { checkCommitRule: boolean } = { checkCommitRule: true }) {}

  private readonly leaderOfTerm = new Map<number, NodeId>();
  private readonly entryAt = new Map<string, RecordedEntry>();
  private readonly committed = new Map<number, CommittedEntry>();
  /** Leaders currently in office, to check entries committed after they were elected. */
  private readonly currentLeaders = new Map<NodeId, { term: number; log: LogView }>();

  get ok(): boolean {
    return this.violations.length === 0;
  }

  get leadersSeen(): number {
    return this.leaderOfTerm.size;
  }

  get committedCount(): number {
    return this.committed.size;
  }

  /** Call after every operation on a node with the role and term it reports. */
  observeRole(node: NodeId, term: number, isLeader: boolean, log: LogView): void {
    if (!isLeader) {
      this.currentLeaders.delete(node);
      return;
    }
    const known = this.leaderOfTerm.get(term);
    if (known !== undefined && known !== node) {
      this.fail('election safety', `term ${term} has two leaders: ${known} and ${node}`);
    }
    const office = this.currentLeaders.get(node);
    if (known === undefined || office?.term !== term) {
      this.leaderOfTerm.set(term, node);
      this.currentLeaders.set(node, { term, log });
      // A new leader: every entry committed in an earlier term must be in its log.
      for (const [index, c] of this.committed) {
        if (c.commitTerm < term) this.checkLeaderHas(node, term, log, index, c);
      }
    }
  }

  /** A node crashed or paused: it holds no office the checker can inspect any more. */
  forgetNode(node: NodeId): void {
    this.currentLeaders.delete(node);
  }

  /**
   * Call for entries just made durable on `node`, in write order; `prevTermOf(i)` is the
   * durable term of entry i at that moment (undefined when i is compacted or absent).
   */
  observeDurableEntries(node: NodeId, entries: Entry[], prevTermOf: (index: number) => number | undefined): void {
    for (const e of entries) {
      const key = `${e.index}/${e.term}`;
      const rec: RecordedEntry = { contentKey: contentKey(e), prevTerm: prevTermOf(e.index - 1), by: node };
      const seen = this.entryAt.get(key);
      if (!seen) {
        this.entryAt.set(key, rec);
        continue;
      }
      if (seen.contentKey !== rec.contentKey) {
        this.fail('log matching', `entry ${key} differs between ${seen.by} and ${node}`);
      } else if (seen.prevTerm !== undefined && rec.prevTerm !== undefined && seen.prevTerm !== rec.prevTerm) {
        this.fail(
          'log matching',
          `entry ${key} follows term ${seen.prevTerm} on ${seen.by} but term ${rec.prevTerm} on ${node}`,
        );
      } else if (seen.prevTerm === undefined) {
        seen.prevTerm = rec.prevTerm;
      }
    }
  }

  /** Call for each entry a node's state machine applies, with the node's current term. */
  observeApplied(node: NodeId, entry: Entry, nodeTerm: number): void {
    const key = contentKey(entry);
    const c = this.committed.get(entry.index);
    if (!c) {
      const rec: CommittedEntry = { term: entry.term, contentKey: key, commitTerm: nodeTerm, by: node };
      this.committed.set(entry.index, rec);
      // Leaders already in office with a later term must hold it too.
      for (const [leader, office] of this.currentLeaders) {
        if (office.term > nodeTerm) this.checkLeaderHas(leader, office.term, office.log, entry.index, rec);
      }
      return;
    }
    if (c.term !== entry.term || c.contentKey !== key) {
      this.fail(
        'state machine safety',
        `index ${entry.index}: ${c.by} applied an entry of term ${c.term}, ${node} applied one of term ${entry.term}` +
          (c.term === entry.term ? ' with different content' : ''),
      );
    }
    if (nodeTerm < c.commitTerm) c.commitTerm = nodeTerm;
  }

  /** A leader in `term` moved its commit index from `from` to `to` (seen in its Ready's hard state). */
  observeLeaderCommit(node: NodeId, term: number, from: number, to: number, log: LogView): void {
    if (!this.opts.checkCommitRule || to <= from) return;
    const t = log.termAt(to);
    if (t === 'compacted' || t === term) return;
    this.fail(
      'leader commit rule',
      `leader ${node} of term ${term} advanced commit ${from} -> ${to} onto an entry of term ${t ?? 'none'}`,
    );
  }

  /**
   * A direct comparison of durable logs: for every pair, the highest index where both
   * have the same term must be preceded by identical entries.
   */
  checkLogsPairwise(logs: Map<NodeId, { first: number; entries: Entry[] }>): void {
    const ids = [...logs.keys()].sort();
    for (let a = 0; a < ids.length; a++) {
      for (let b = a + 1; b < ids.length; b++) {
        const la = logs.get(ids[a])!;
        const lb = logs.get(ids[b])!;
        const lo = Math.max(la.first, lb.first);
        const hi = Math.min(la.first + la.entries.length, lb.first + lb.entries.length) - 1;
        let agreeUpTo = -1;
        for (let i = hi; i >= lo; i--) {
          if (la.entries[i - la.first].term === lb.entries[i - lb.first].term) {
            agreeUpTo = i;
            break;
          }
        }
        for (let i = lo; i <= agreeUpTo; i++) {
          const ea = la.entries[i - la.first];
          const eb = lb.entries[i - lb.first];
          if (ea.term !== eb.term || contentKey(ea) !== contentKey(eb)) {
            this.fail(
              'log matching',
              `${ids[a]} and ${ids[b]} agree at index ${agreeUpTo} but differ at ${i} (terms ${ea.term}/${eb.term})`,
            );
            break;
          }
        }
      }
    }
  }

  private checkLeaderHas(leader: NodeId, term: number, log: LogView, index: number, c: CommittedEntry): void {
    const t = log.termAt(index);
    if (t === 'compacted' || t === c.term) return;
    this.fail(
      'leader completeness',
      `leader ${leader} of term ${term} lacks entry ${index}/${c.term} committed by term ${c.commitTerm}` +
        ` (it has ${t === undefined ? 'nothing' : `term ${t}`} there)`,
    );
  }

  private fail(invariant: InvariantName, detail: string): void {
    this.violations.push({ invariant, detail });
  }
}

/** Type and payload of an entry, as one comparable string. */
export function contentKey(e: Entry): string {
  return `${e.type}:${Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength).toString('base64')}`;
}

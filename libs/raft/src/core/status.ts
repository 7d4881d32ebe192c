// A read-only snapshot of a node's Raft state, for the driver, metrics and tests.

import type { Raft } from './raft';
import type { ProgressState } from './progress';
import type { ConfState, NodeId, Role } from './types';

export interface FollowerProgress {
  match: number;
  next: number;
  state: ProgressState;
  /** App messages in flight (replicate state). */
  inflight: number;
}

export interface RaftStatus {
  id: NodeId;
  term: number;
  vote: NodeId | null;
  commit: number;
  applied: number;
  lastIndex: number;
  leader: NodeId | null;
  role: Role;
  /** The configuration as of the last applied entry (or the restored snapshot). */
  conf: ConfState;
  leadTransferee: NodeId | null;
  /** Only on the leader: its view of every member, itself included. */
  progress?: Record<NodeId, FollowerProgress>;
}

export function statusOf(r: Raft): RaftStatus {
  const status: RaftStatus = {
    id: r.id,
    term: r.term,
    vote: r.vote,
    commit: r.log.committed,
    applied: r.log.applied,
    lastIndex: r.log.lastIndex(),
    leader: r.lead,
    role: r.role,
    conf: { voters: [...r.tracker.conf.voters], learners: [...r.tracker.conf.learners] },
    leadTransferee: r.leadTransferee,
  };
  if (r.role === 'leader') {
    status.progress = {};
    for (const [id, pr] of r.tracker.progress) {
      status.progress[id] = { match: pr.match, next: pr.next, state: pr.state, inflight: pr.inflights.count };
    }
  }
  return status;
}

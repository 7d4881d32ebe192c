// What get_meta_mode says about the manager group beyond the spec's `mode` (issue 19: the
// web console shows members, leader and term). Measured from this member's Raft state:
// only a leader tracks how far each member's log has come, so `match` and `replication`
// are filled when the member that answers leads, and '' otherwise.

import type { RaftStatus } from '@kcm/raft';

export interface GroupMember {
  member: string;
  /** leader, follower or learner, as this member knows the group. */
  role: 'leader' | 'follower' | 'learner';
  /** The leader's view: the highest log index known to be on that member, and how it is being fed (replicate, probe, snapshot). */
  match: string;
  replication: string;
}

export function managerGroup(status: RaftStatus): { term: string; commit: string; answered_by: string; list_member: GroupMember[] } {
  const learners = new Set(status.conf.learners);
  const members = [...status.conf.voters, ...status.conf.learners];
  return {
    term: String(status.term),
    commit: String(status.commit),
    answered_by: status.id,
    list_member: members.map((member) => {
      const progress = status.progress?.[member];
      return {
        member,
        role: member === status.leader ? 'leader' : learners.has(member) ? 'learner' : 'follower',
        match: progress === undefined ? '' : String(progress.match),
        replication: progress === undefined ? '' : progress.state,
      };
    }),
  };
}

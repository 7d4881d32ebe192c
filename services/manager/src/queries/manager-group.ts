// What get_meta_mode says about the manager group beyond the spec's `mode` (issue 19: the
// web console shows members, leader and term). Measured from this member's Raft state:
// only a leader tracks how far each member's log has come, so `match` and `replication`
// are filled when the member that answers leads, and '' otherwise.
//
// Each member's kcm protocol and release (docs/upgrade.md: how to check each step of an
// upgrade) come from the answering member's Member.Describe rounds (group/member-versions.ts);
// each agent's from what the answering member's own calls to it last carried
// (protocol-version.ts): the leader calls every agent every few seconds, a follower seldom.

import type { RaftStatus } from '@kcm/raft';
import { peerProtocols, type Agents } from '@kcm/agent-api';
import type { MemberVersion } from '../group/member-versions';
import type { MetaState } from '../meta/state';

export interface GroupMember {
  member: string;
  /** leader, follower or learner, as this member knows the group. */
  role: 'leader' | 'follower' | 'learner';
  /** The leader's view: the highest log index known to be on that member, and how it is being fed (replicate, probe, snapshot). */
  match: string;
  replication: string;
  /** Its kcm protocol ('' not known yet) and release ('' for a build older than 0.2.0, or not known). */
  protocol: string;
  kcm_version: string;
}

export interface AgentVersion {
  hostaddr: string;
  /** The agent's kcm protocol and release as its last reply to this member stated them; '' when it has not answered this member. */
  protocol: string;
  kcm_version: string;
}

export function managerGroup(status: RaftStatus, versions: readonly MemberVersion[] = []): { term: string; commit: string; answered_by: string; list_member: GroupMember[] } {
  const learners = new Set(status.conf.learners);
  const members = [...status.conf.voters, ...status.conf.learners];
  const versionOf = new Map(versions.map((v) => [v.member, v]));
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
        protocol: versionOf.get(member)?.protocol === undefined ? '' : String(versionOf.get(member)?.protocol),
        kcm_version: versionOf.get(member)?.kcmVersion ?? '',
      };
    }),
  };
}

/** Every registered host's agent, with the protocol and release it last stated to this member. */
export function agentVersions(state: MetaState, agents: Pick<Agents, 'agentAddress'>): AgentVersion[] {
  const hosts = [...new Set(Object.values(state.machines).map((m) => m.hostaddr))].sort();
  const seen = peerProtocols();
  return hosts.map((hostaddr) => {
    const stated = seen.get(agents.agentAddress(hostaddr));
    return { hostaddr, protocol: stated?.protocol === undefined ? '' : String(stated.protocol), kcm_version: stated?.kcmVersion ?? '' };
  });
}

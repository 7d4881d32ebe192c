// Sync queries answered from the replicated state, plus live probes where the spec asks
// for live status. Each runs after a ReadIndex barrier (see ManagerService.runQuery).

import type { ConfState, RaftStatus } from '@kcm/raft';
import type { WithAgent, Agents } from '@kcm/agent-api';
import type { QueryHandler } from '../submit/manager-service';
import type { MetaState } from '../meta/state';
import { clusterQueries } from './clusters';
import { backupStorageList, withBackupSets } from './backups';
import { getAudit, listTokens } from './auth';
import { listJobs } from './jobs';
import { agentVersions, managerGroup } from './manager-group';
import type { MemberVersion } from '../group/member-versions';
import { defaultTableStatsOf, expandTableListQuery, type TableStatsOf } from './expand-table-list';

export interface QueryDeps {
  /** The current Raft configuration (voters and learners). */
  conf(): ConfState;
  /** The leader as this member knows it. */
  leader(): string | null;
  withAgent: WithAgent;
  /** Engine clients of every host's agent, for the live cluster queries. */
  agents: Agents;
  /** The manager's clock (ms), for windows shown relative to now (no-switch). Default Date.now. */
  now?: () => number;
  /** The tokens of the manager's config, for list_tokens (names and roles only). */
  configTokens?: readonly { name: string; role: string }[];
  /** This member's Raft status (term, and on the leader its view of each member), for get_meta_mode. */
  raftStatus?(): RaftStatus;
  /** Each member's kcm protocol and release as this member last learnt them (group/member-versions.ts), for get_meta_mode. */
  memberVersions?(): MemberVersion[];
  /** Table sizes and access counts of a storage node (get_expand_table_list); default: its agent. */
  tableStatsOf?: TableStatsOf;
}

/** `no_rep` for a one-member group, `mgr` for a consensus group of two or more. */
export function metaMode(conf: ConfState): 'no_rep' | 'mgr' {
  return conf.voters.length + conf.learners.length > 1 ? 'mgr' : 'no_rep';
}

async function machineSummary(state: MetaState, deps: QueryDeps): Promise<Record<string, unknown>> {
  const hosts = [...new Set(Object.values(state.machines).map((m) => m.hostaddr))].sort();
  const list_machine = await Promise.all(
    hosts.map(async (hostaddr) => {
      const records = Object.values(state.machines).filter((m) => m.hostaddr === hostaddr);
      let reachable = false;
      try {
        await deps.withAgent(hostaddr, (agent) => agent.health());
        reachable = true;
      } catch {
        reachable = false;
      }
      const inService = records.every((m) => m.nodeStats === 'running');
      return {
        hostaddr,
        // Online means usable now: in service (node_stats running; spec: dead = offline) and
        // its agent answered this probe. A machine set dead is offline even while its agent
        // answers: `agent` shows that measurement on its own.
        status: inService && reachable ? 'online' : 'offline',
        node_stats: inService ? 'running' : 'dead',
        agent: reachable ? 'reachable' : 'unreachable',
        machine_types: records.map((m) => m.machineType).sort(),
      };
    }),
  );
  return { list_machine };
}

export function buildQueries(deps: QueryDeps): Map<string, QueryHandler> {
  return new Map<string, QueryHandler>([
    [
      'get_meta_mode',
      (_req, state) => ({
        mode: metaMode(deps.conf()),
        leader: deps.leader(),
        members: deps.conf().voters,
        learners: deps.conf().learners,
        ...(deps.raftStatus ? managerGroup(deps.raftStatus(), deps.memberVersions?.()) : {}),
        list_agent: agentVersions(state, deps.agents),
      }),
    ],
    ['get_machine_summary', (_req, state) => machineSummary(state, deps)],
    // Built once, with the manager's clock (a no-switch window shown is judged at `now`), and
    // get_cluster_detail lists the cluster's backup sets too.
    ...clusterQueries({ agents: deps.agents, now: deps.now }).map(([name, handler]): [string, QueryHandler] => [name, name === 'get_cluster_detail' ? withBackupSets(handler) : handler]),
    // get_backup_storage comes with the backup family: until backup storage can be
    // registered there is no state to answer from, so it is UNSUPPORTED, not an empty list.
    ['get_backup_storage', (_req, state) => backupStorageList(state)],
    ['list_tokens', listTokens(deps.configTokens ?? [])],
    ['get_audit', getAudit],
    ['list_jobs', listJobs(deps.now ?? Date.now)],
    expandTableListQuery(deps.tableStatsOf ?? defaultTableStatsOf(deps.agents)),
  ]);
}

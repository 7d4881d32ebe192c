// Choosing the standby to promote: among the standbys whose agent answers and whose
// mariadbd answers SQL, the one that will be furthest once its relay log is applied
// (its received position, Gtid_IO_Pos, or its applied one if further; only the applied one
// when its SQL thread has stopped), preferring one
// that was acknowledging semi-sync transactions (it has every acknowledged commit).

import type { Agents, MariaDbHaStatusReply } from '@kcm/agent-api';
import { gtidCovers, gtidProgress } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import type { StorageNodeRecord } from '../../meta/state';
import { where } from './shard-view';

export interface StandbySurvey {
  node: StorageNodeRecord;
  /** Undefined when its agent did not answer. */
  status?: MariaDbHaStatusReply;
  problem: string;
}

export interface CandidateChoice {
  node_id: string;
  hostaddr: string;
  port: number;
  /** What it will have applied: the furthest of its received and applied positions. */
  gtid: string;
  semi_sync_acker: boolean;
  considered: { node_id: string; hostaddr: string; port: number; gtid: string; usable: boolean; problem: string }[];
}

export async function surveyStandbys(agents: Agents, standbys: StorageNodeRecord[], deadlineMs = 3000): Promise<StandbySurvey[]> {
  return Promise.all(
    standbys.map(async (node): Promise<StandbySurvey> => {
      try {
        const status = await agents.mariadbHa(node.hostaddr).replicationStatus(node.port, 0, deadlineMs);
        return { node, status, problem: status.answering ? '' : status.reason || 'does not answer SQL' };
      } catch (err) {
        return { node, problem: (err as Error).message };
      }
    }),
  );
}

/**
 * The position a standby reaches once everything it received is applied. A standby whose
 * SQL thread has stopped (an apply error) will apply nothing more: only what it applied
 * counts, or it would outrank a standby that holds the transactions it only received, and
 * be promoted without them (the bank soak lost thousands of committed transfers that way).
 */
export function reachablePosition(status: MariaDbHaStatusReply): string {
  const applied = status.gtid_slave_pos || status.gtid_current_pos;
  const received = status.gtid_io_pos;
  if (!received) return applied;
  if (status.is_replica && (!status.sql_running || status.last_sql_error)) return applied;
  try {
    return gtidCovers(applied, received) ? applied : received;
  } catch {
    return applied;
  }
}

/** Pure: the choice among surveyed standbys; NO_RESOURCES when none is usable. */
export function chooseCandidate(surveys: StandbySurvey[]): CandidateChoice {
  // A node fenced in the metadata is an old master waiting to rejoin: never a candidate.
  const usable = surveys.filter((s) => s.status?.answering && !s.node.fenced);
  const considered = surveys.map((s) => ({
    node_id: s.node.id,
    hostaddr: s.node.hostaddr,
    port: s.node.port,
    gtid: s.status?.answering ? reachablePosition(s.status) : '',
    usable: usable.includes(s),
    problem: s.problem || (s.node.fenced ? 'fenced' : ''),
  }));
  if (usable.length === 0) {
    throw KcmError.of('NO_RESOURCES', `no standby can be promoted: ${considered.map((c) => `${where(c)} ${c.problem}`).join('; ')}`);
  }
  const ranked = [...usable].sort((a, b) => {
    const pa = gtidProgress(reachablePosition(a.status!));
    const pb = gtidProgress(reachablePosition(b.status!));
    if (pa !== pb) return pb - pa;
    // Among equals, the one with the least relay log left to apply takes writes soonest (a
    // standby just rebuilt or re-attached may have received everything and applied little).
    const appliedA = gtidProgress(a.status!.gtid_slave_pos || a.status!.gtid_current_pos);
    const appliedB = gtidProgress(b.status!.gtid_slave_pos || b.status!.gtid_current_pos);
    if (appliedA !== appliedB) return appliedB - appliedA;
    const acka = a.status!.semi_sync_slave_active ? 1 : 0;
    const ackb = b.status!.semi_sync_slave_active ? 1 : 0;
    if (acka !== ackb) return ackb - acka;
    return Number(a.node.id) - Number(b.node.id);
  });
  const best = ranked[0];
  return {
    node_id: best.node.id,
    hostaddr: best.node.hostaddr,
    port: best.node.port,
    gtid: reachablePosition(best.status!),
    semi_sync_acker: best.status!.semi_sync_slave_active,
    considered,
  };
}

// Which instance a rebuild copies from: the first healthy standby (both replication
// threads running, lag within allow_replica_delay), else the master, but only when
// allow_pull_from_master says the master may carry the extra load. Pure: the caller probes.

import { AgentFailure, type MariaDbBackupSource, type MariaDbProbeReply } from '@kcm/agent-api';

export interface SourcePolicy {
  allowReplicaDelayS: number;
  allowPullFromMaster: boolean;
}

export interface ProbedSource {
  source: MariaDbBackupSource;
  /** undefined when the source's agent could not be asked. */
  probe: MariaDbProbeReply | undefined;
}

export class NoBackupSourceError extends AgentFailure {
  constructor(readonly reasons: string[]) {
    super('failed_precondition', `no suitable backup source: ${reasons.join('; ') || 'no candidates given'}`);
    this.name = 'NoBackupSourceError';
  }
}

/** Why a standby cannot serve as a source, or undefined when it can. */
export function standbyUnsuitable(probe: MariaDbProbeReply | undefined, policy: SourcePolicy): string | undefined {
  if (!probe) return 'its agent did not answer';
  if (probe.state !== 'online') return `it is ${probe.state}${probe.reason ? ` (${probe.reason})` : ''}`;
  if (!probe.is_replica) return 'it is not replicating';
  if (!probe.io_running || !probe.sql_running) return `replication is broken (io=${probe.io_running} sql=${probe.sql_running})`;
  if (probe.seconds_behind_master < 0) return 'its lag is unknown';
  if (probe.seconds_behind_master > policy.allowReplicaDelayS) return `it is ${probe.seconds_behind_master} s behind (allowed ${policy.allowReplicaDelayS} s)`;
  return undefined;
}

export function chooseBackupSource(candidates: ProbedSource[], policy: SourcePolicy): MariaDbBackupSource {
  const reasons: string[] = [];
  const name = (s: MariaDbBackupSource) => `${s.hostaddr}:${s.port}`;
  for (const { source, probe } of candidates) {
    if (source.is_master) continue;
    const why = standbyUnsuitable(probe, policy);
    if (!why) return source;
    reasons.push(`standby ${name(source)}: ${why}`);
  }
  for (const { source, probe } of candidates) {
    if (!source.is_master) continue;
    if (!policy.allowPullFromMaster) reasons.push(`master ${name(source)}: allow_pull_from_master is off`);
    else if (probe?.state !== 'online') reasons.push(`master ${name(source)}: it is ${probe?.state ?? 'unreachable'}`);
    else return source;
  }
  throw new NoBackupSourceError(reasons);
}

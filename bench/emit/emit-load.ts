// The two Emit workloads, measured with raft-kv's closed-loop phase runner (same workers,
// same percentiles) so the figures sit side by side with its puts/s:
//  - async jobs: create_machine of a host nobody serves. The reply comes only after
//    JobSubmitted is committed (validated against the replicated state on the leader,
//    forwarded there by followers); then the leader runs the job: JobStarted, the agent
//    connection is refused, JobFinished failed. Each request names a host of its own, so
//    jobs never queue behind a shared lock and every submission is a new registration.
//  - queued submissions: the same requests, all naming one host whose agent never answers
//    (stalled-agent.ts). Its first job holds the host's lock; the others queue behind it
//    and do not run during the phase, which so measures submissions alone.
//  - sync queries: get_cluster_summary, answered by the member asked after a ReadIndex
//    barrier.
// Requests go round-robin over all members, over keep-alive connections (undici's Pool,
// the test helpers' KeepAliveClient): the load generator shares the machine's two cores
// with the managers, so its own CPU per request counts (see keep-alive-client.ts), as
// raft-kv's own load generator (a batched gRPC stream) is lean too.

import type { ReplyEnvelope } from '@kcm/protocol';
import { runPhase, type PhaseResult } from '../raft-kv/workload';
import { EMIT_PATH } from '@kcm/manager';
import { KeepAliveClient } from '../../test/manager/helpers/keep-alive-client';
import { requestEnvelope, type EmitOptions } from '../../test/helpers/emit-client';
import { createMachineParas } from '../../test/manager/helpers/group';

const connections = new KeepAliveClient();

/** Like emitRaw (same envelope), over the pooled connections. */
function emitKeepAlive(member: string, jobType: string, paras: Record<string, unknown>, opts: EmitOptions): Promise<ReplyEnvelope> {
  const body = JSON.stringify(requestEnvelope(jobType, paras, opts));
  return connections.postJson(member, EMIT_PATH, body, { headers: {}, timeoutMs: opts.timeoutMs ?? 15_000 }) as Promise<ReplyEnvelope>;
}

/** Closes the pooled connections (at the end of a run). */
export function closeConnections(): void {
  connections.close();
}

export interface EmitTarget {
  members: readonly string[];
  /** Folder named in the create_machine paras (never touched: the agent is unreachable). */
  baseDir: string;
}

/** 127.3.0.0/16: loopback addresses no test or agent listens on. */
function unservedHost(n: number): string {
  return `127.3.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
}

export interface AsyncPhaseResult extends PhaseResult {
  /** Job ids acknowledged in this phase (to wait for their end afterwards). */
  jobIds: string[];
}

/** Counts hosts handed out across phases, so no two requests of a run name the same host. */
export interface HostCounter {
  next: number;
}

/** Phases started so far: part of every request_id, so that no two phases share one (a repeated id is a duplicate, not a new job). */
let phasesStarted = 0;

/**
 * create_machine requests at `concurrency` for `seconds`, each with a request_id of its own
 * and, unless `hostOf` says otherwise, a host of its own.
 */
export async function asyncJobsPhase(
  target: EmitTarget,
  concurrency: number,
  seconds: number,
  hosts: HostCounter,
  runId: string,
  hostOf: (n: number) => string = unservedHost,
): Promise<AsyncPhaseResult> {
  const jobIds: string[] = [];
  const result = await runPhase({
    concurrency,
    seconds,
    keyPrefix: `${runId}-p${++phasesStarted}-c${concurrency}`,
    put: async (_worker, key) => {
      const n = hosts.next++;
      const member = target.members[n % target.members.length];
      try {
        const reply = await emitKeepAlive(member, 'create_machine', createMachineParas(hostOf(n), target.baseDir), { requestId: key, timeoutMs: 30_000 });
        if (reply.error_code !== '0' || reply.status !== 'accept') return false;
        jobIds.push(reply.job_id);
        return true;
      } catch {
        return false;
      }
    },
  });
  return { ...result, jobIds };
}

export async function queriesPhase(target: EmitTarget, concurrency: number, seconds: number): Promise<PhaseResult> {
  let next = 0;
  return runPhase({
    concurrency,
    seconds,
    keyPrefix: `query-c${concurrency}`,
    put: async () => {
      const member = target.members[next++ % target.members.length];
      try {
        const reply = await emitKeepAlive(member, 'get_cluster_summary', {}, { timeoutMs: 30_000 });
        return reply.error_code === '0' && reply.status === 'done';
      } catch {
        return false;
      }
    },
  });
}

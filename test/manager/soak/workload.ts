// The soak's clients: each keeps submitting jobs (with request_id retries) and waits for
// every job to end, recording what it submitted and how each job ended. Kinds:
//  - lifecycle: create_machine then delete_machine of one host with a live agent, forever;
//    every job must end done, and the client knows whether the host is registered now.
//  - unreachable: create_machine of a host with no agent; every job must end failed,
//    with a reason (AGENT_UNREACHABLE).
//  - status: set_machine of a permanently registered host, alternating running/dead.

import type { ReplyEnvelope } from '@kcm/protocol';
import { EmitError, submitJob, waitForJobEnd } from '../../helpers/emit-client';
import { createMachineParas } from '../helpers/group';

export interface JobRecordOfClient {
  client: string;
  requestId: string;
  jobId: string;
  jobType: string;
  expected: 'done' | 'failed';
  end?: ReplyEnvelope;
  /** The job did not end within the client's wait (a stuck job). */
  stuck?: boolean;
}

export interface ClientReport {
  name: string;
  jobs: JobRecordOfClient[];
  /** Submissions never acknowledged, with the error that ended them. */
  unacknowledged: { requestId: string; error: string }[];
  retries: number;
  /** For lifecycle clients: whether its host should be registered now. */
  registered?: boolean;
}

export interface ClientContext {
  members: () => readonly string[];
  baseDir: string;
  /** Per-run prefix so request ids of two soak runs never meet. */
  runId: string;
  running: () => boolean;
}

type Step = { jobType: string; paras: Record<string, unknown>; expected: 'done' | 'failed' };

async function runClient(name: string, ctx: ClientContext, next: (n: number, report: ClientReport) => Step, onEnd?: (step: Step, end: ReplyEnvelope, report: ClientReport) => void): Promise<ClientReport> {
  const report: ClientReport = { name, jobs: [], unacknowledged: [], retries: 0 };
  for (let n = 0; ctx.running(); n++) {
    const step = next(n, report);
    const requestId = `${ctx.runId}-${name}-${n}`;
    let jobId: string;
    try {
      ({ jobId } = await submitJob(ctx.members, step.jobType, step.paras, { requestId, timeoutMs: 60_000, onRetry: () => report.retries++ }));
    } catch (err) {
      // Refused for good (validation, conflict): the client's record of its host may be wrong from here on.
      report.unacknowledged.push({ requestId, error: err instanceof EmitError ? err.message : String(err) });
      return report;
    }
    const record: JobRecordOfClient = { client: name, requestId, jobId, jobType: step.jobType, expected: step.expected };
    report.jobs.push(record);
    try {
      record.end = await waitForJobEnd(ctx.members, jobId, 90_000);
      onEnd?.(step, record.end, report);
    } catch {
      record.stuck = true;
      return report; // its host's state is unknown from here on: stop this client
    }
  }
  return report;
}

export function lifecycleClient(host: string, ctx: ClientContext): Promise<ClientReport> {
  const paras = createMachineParas(host, ctx.baseDir);
  return runClient(
    `lifecycle-${host}`,
    ctx,
    (_n, report) =>
      report.registered
        ? { jobType: 'delete_machine', paras: { hostaddr: host, machine_type: 'storage' }, expected: 'done' }
        : { jobType: 'create_machine', paras, expected: 'done' },
    (step, end, report) => {
      if (end.status === 'done') report.registered = step.jobType === 'create_machine';
    },
  );
}

export function unreachableClient(hosts: string[], ctx: ClientContext): Promise<ClientReport> {
  return runClient('unreachable', ctx, (n) => ({ jobType: 'create_machine', paras: createMachineParas(hosts[n % hosts.length], ctx.baseDir), expected: 'failed' }));
}

export function statusClient(name: string, host: string, ctx: ClientContext): Promise<ClientReport> {
  return runClient(name, ctx, (n) => ({ jobType: 'set_machine', paras: { hostaddr: host, node_stats: n % 2 === 0 ? 'dead' : 'running' }, expected: 'done' }));
}

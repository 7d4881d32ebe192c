// A client load that runs while the group is restarted under it: sync queries in a loop, and
// jobs submitted with a request_id, each request sent as a careful client does (docs/upgrade.md):
// on no reply (the member is down) or a NO_LEADER / OVERLOADED / TIMEOUT answer, the same
// request (the same request_id for a job) goes to the next member. What it counts is what
// the tests assert: requests that still failed after those retries must be none.

import { randomUUID } from 'node:crypto';
import type { ReplyEnvelope } from '@kcm/protocol';
import { emitRaw, EmitError, submitJob } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';

const RETRYABLE = new Set(['4000', '4001', '2002']); // NO_LEADER, OVERLOADED, TIMEOUT

export interface LoadReport {
  /** Requests answered with success (after retries). */
  answered: number;
  /** Attempts that had to be sent again (a member down, no leader yet). */
  retries: number;
  /** Requests that failed after their retries, or were answered with an error: must be empty. */
  failed: string[];
  /** Job ids acknowledged, by what they were for. */
  jobs: { what: string; jobId: string }[];
}

export class SteadyLoad {
  private readonly report: LoadReport = { answered: 0, retries: 0, failed: [], jobs: [] };
  private running = true;
  private loop: Promise<void> | undefined;
  private next = 0;

  /** `queries`: the sync queries sent in turn, over and over. */
  constructor(private readonly members: readonly string[], private readonly queries: readonly { jobType: string; paras: Record<string, unknown> }[], private readonly retryBudgetMs = 60_000) {}

  start(): this {
    this.loop = (async () => {
      for (let i = 0; this.running; i++) {
        const q = this.queries[i % this.queries.length];
        await this.query(q.jobType, q.paras);
        await sleep(100);
      }
    })();
    return this;
  }

  /** One sync query, sent to the members in turn until one answers it (or the budget runs out: a failure). */
  async query(jobType: string, paras: Record<string, unknown>): Promise<ReplyEnvelope | undefined> {
    const deadline = Date.now() + this.retryBudgetMs;
    let last = '';
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      const member = this.members[this.next++ % this.members.length];
      try {
        const reply = await emitRaw(member, jobType, paras, { timeoutMs: 10_000 });
        if (reply.error_code === '0') {
          this.report.answered++;
          return reply;
        }
        last = `${member}: ${reply.error_code} ${reply.error_info}`;
        if (!RETRYABLE.has(reply.error_code)) break;
      } catch (err) {
        last = (err as Error).message;
      }
      this.report.retries++;
      await sleep(Math.min(100 * (attempt + 1), 500));
    }
    this.report.failed.push(`${jobType}: ${last}`);
    return undefined;
  }

  /** Submits a job with a request_id of its own, retried across the members; its id, or undefined (counted failed). */
  async submit(what: string, jobType: string, paras: Record<string, unknown>): Promise<string | undefined> {
    try {
      const ack = await submitJob(this.members, jobType, paras, { requestId: `rolling-${what.replace(/[^A-Za-z0-9_.-]+/g, '-').slice(0, 60)}-${randomUUID()}`, timeoutMs: this.retryBudgetMs, onRetry: () => this.report.retries++ });
      this.report.answered++;
      this.report.jobs.push({ what, jobId: ack.jobId });
      return ack.jobId;
    } catch (err) {
      this.report.failed.push(`${what} (${jobType}): ${err instanceof EmitError || err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  async stop(): Promise<LoadReport> {
    this.running = false;
    await this.loop;
    return this.report;
  }
}

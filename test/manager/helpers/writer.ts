// A client that keeps submitting async jobs while a test changes the group underneath it,
// and records how each submission went: accepted (after how many tries, how long), or not.

import { EmitError, submitJob } from '../../helpers/emit-client';
import { sleep } from './processes';

export interface Submission {
  jobId: string;
  requestId: string;
  attempts: number;
  /** From the first try to the acknowledgement. */
  latencyMs: number;
  member: string;
}

export interface WriterReport {
  accepted: Submission[];
  /** Submissions that were never acknowledged (the error that ended them). */
  rejected: { requestId: string; error: string }[];
  /** Retryable failures seen on the way (NO_LEADER, no reply...), by error text prefix. */
  retries: number;
}

export class ContinuousWriter {
  private running = true;
  private loop: Promise<void> | undefined;
  readonly report: WriterReport = { accepted: [], rejected: [], retries: 0 };

  /**
   * @param members the members to send to, read before every submission (round-robin)
   * @param job the job type and paras of the n-th submission
   */
  constructor(
    private readonly name: string,
    private readonly members: () => readonly string[],
    private readonly job: (n: number) => { jobType: string; paras: Record<string, unknown> },
    private readonly pauseMs = 150,
    private readonly giveUpAfterMs = 30_000,
  ) {}

  start(): this {
    this.loop = this.run();
    return this;
  }

  private async run(): Promise<void> {
    for (let n = 0; this.running; n++) {
      const { jobType, paras } = this.job(n);
      const requestId = `${this.name}-${process.pid}-${n}`;
      const started = Date.now();
      // Each submission starts at the next member, so writes spread over the whole group.
      const startingAt = () => {
        const list = this.members();
        return [...list.slice(n % list.length), ...list.slice(0, n % list.length)];
      };
      try {
        const r = await submitJob(startingAt, jobType, paras, {
          requestId,
          timeoutMs: this.giveUpAfterMs,
          onRetry: () => this.report.retries++,
        });
        this.report.accepted.push({ jobId: r.jobId, requestId, attempts: r.attempts, latencyMs: Date.now() - started, member: r.member });
      } catch (err) {
        this.report.rejected.push({ requestId, error: err instanceof EmitError ? err.message : String(err) });
      }
      await sleep(this.pauseMs);
    }
  }

  async stop(): Promise<WriterReport> {
    this.running = false;
    await this.loop;
    return this.report;
  }
}

// Any member serves the gateway. Writes (async job submissions) go to the leader: served
// here when this member leads, otherwise the request is forwarded to the leader's gateway
// and its reply relayed. Reads (get_status, queries) are served locally after a ReadIndex
// barrier, so they are linearizable on every member without loading the leader.

import { errorEntryByCode, KcmError, type ReplyEnvelope, type ValidRequest } from '@kcm/protocol';
import type { NodeId } from '@kcm/raft';
import { EMIT_PATH, FORWARDED_BY_HEADER } from './gateway/build-gateway';
import { REQUEST_ID_HEADER } from './gateway/request-log';
import type { JobService, JobStatusView, SubmitContext } from './gateway/job-service';
import { LeaderForwarder } from './leader-forwarder';

export interface RoutingDeps {
  local: JobService;
  self: NodeId;
  /** The leader as this member knows it, or null during an election. */
  leader(): NodeId | null;
  /** Sent to the leader when authentication is on (members share the token list). */
  token?: string;
  forwardTimeoutMs?: number;
}

export class RoutingService implements JobService {
  private readonly forwarder = new LeaderForwarder();

  constructor(private readonly deps: RoutingDeps) {}

  /** Closes the pooled connections to the leader. */
  close(): void {
    this.forwarder.close();
  }

  async submitJob(req: ValidRequest, context: SubmitContext = {}): Promise<{ jobId: string }> {
    const leader = this.deps.leader();
    if (leader === this.deps.self) return this.deps.local.submitJob(req);
    if (leader === null) throw KcmError.of('NO_LEADER', 'no leader is known right now (election in progress or quorum lost); retry shortly');
    if (context.forwardedBy) {
      // Forwarded to us, but we are not the leader either: leadership moved; let the client retry.
      throw KcmError.of('NO_LEADER', `leadership moved while the request was forwarded from ${context.forwardedBy}; retry`);
    }
    const reply = await this.forward(leader, req, context.requestId);
    if (reply.error_code !== '0') throw relayedError(reply);
    return { jobId: reply.job_id };
  }

  getStatus(jobId: string): Promise<JobStatusView> {
    return this.deps.local.getStatus(jobId);
  }

  runQuery(req: ValidRequest): Promise<Record<string, unknown>> {
    return this.deps.local.runQuery(req);
  }

  private async forward(leader: NodeId, req: ValidRequest, requestId: string | undefined): Promise<ReplyEnvelope> {
    const headers: Record<string, string> = { [FORWARDED_BY_HEADER]: this.deps.self };
    // The leader keeps the id, so both members' lines about this request share it.
    if (requestId) headers[REQUEST_ID_HEADER] = requestId;
    if (this.deps.token) headers.authorization = `Bearer ${this.deps.token}`;
    try {
      const reply = await this.forwarder.postJson(leader, EMIT_PATH, JSON.stringify(req.envelope), { headers, timeoutMs: this.deps.forwardTimeoutMs ?? 15_000 });
      return reply as ReplyEnvelope;
    } catch (err) {
      throw KcmError.of('NO_LEADER', `the leader ${leader} did not answer the forwarded request: ${(err as Error).message}; retry`, { cause: err });
    }
  }
}

function relayedError(reply: ReplyEnvelope): KcmError {
  const entry = errorEntryByCode(Number(reply.error_code));
  return KcmError.of(entry?.name ?? 'INTERNAL', reply.error_info || `leader answered error ${reply.error_code}`);
}

// Any member serves the gateway. Writes (async job submissions) go to the leader: served
// here when this member leads, otherwise forwarded to the leader over one gRPC stream
// (forward/) and its answer relayed. Reads (get_status, queries) are served locally after
// a ReadIndex barrier, so they are linearizable on every member without loading the leader.

import { errorEntryByCode, KcmError, type ValidRequest } from '@kcm/protocol';
import type { NodeId } from '@kcm/raft';
import type { JobService, JobStatusView, SubmitContext } from './gateway/job-service';
import type { SubmitReply } from './forward/forward-proto';
import { LeaderLink } from './forward/leader-link';
import { raftAddressOf } from './members';

export interface RoutingDeps {
  local: JobService;
  self: NodeId;
  /** The leader as this member knows it, or null during an election. */
  leader(): NodeId | null;
  forwardTimeoutMs?: number;
}

export class RoutingService implements JobService {
  private readonly link = new LeaderLink();

  constructor(private readonly deps: RoutingDeps) {}

  /** Closes the streams to the leader. */
  close(): void {
    this.link.close();
  }

  async submitJob(req: ValidRequest, context: SubmitContext = {}): Promise<{ jobId: string }> {
    const leader = this.deps.leader();
    if (leader === this.deps.self) return this.deps.local.submitJob(req);
    if (leader === null) throw KcmError.of('NO_LEADER', 'no leader is known right now (election in progress or quorum lost); retry shortly');
    if (context.forwardedBy) {
      // Forwarded to us, but we are not the leader either: leadership moved; let the client retry.
      throw KcmError.of('NO_LEADER', `leadership moved while the request was forwarded from ${context.forwardedBy}; retry`);
    }
    return this.forward(leader, JSON.stringify(req.envelope), context.requestId);
  }

  relaySubmission(envelope: Record<string, unknown>, context: SubmitContext): Promise<{ jobId: string }> | null {
    const leader = this.deps.leader();
    if (leader === null || leader === this.deps.self || context.forwardedBy) return null;
    return this.forward(leader, JSON.stringify(envelope), context.requestId);
  }

  getStatus(jobId: string): Promise<JobStatusView> {
    return this.deps.local.getStatus(jobId);
  }

  runQuery(req: ValidRequest): Promise<Record<string, unknown>> {
    return this.deps.local.runQuery(req);
  }

  /** Hands an envelope (JSON text) to the leader; resolves with the job id it answered, or throws the error it answered. */
  private async forward(leader: NodeId, envelopeJson: string, requestId: string | undefined): Promise<{ jobId: string }> {
    let reply: SubmitReply;
    try {
      // The leader keeps the request id, so both members' lines about this request share it.
      const request = { envelope_json: envelopeJson, request_id: requestId ?? '', forwarded_by: this.deps.self };
      reply = await this.link.submit(raftAddressOf(leader), request, this.deps.forwardTimeoutMs ?? 15_000);
    } catch (err) {
      throw KcmError.of('NO_LEADER', `the leader ${leader} did not answer the forwarded request: ${(err as Error).message}; retry`, { cause: err });
    }
    if (reply.error_code !== 0) throw relayedError(reply);
    return { jobId: reply.job_id };
  }
}

function relayedError(reply: SubmitReply): KcmError {
  const entry = errorEntryByCode(reply.error_code);
  return KcmError.of(entry?.name ?? 'INTERNAL', reply.error_info || `the leader answered error ${reply.error_code}`);
}

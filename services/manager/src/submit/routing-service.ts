// Any member serves the gateway. Writes (async job submissions) go to the leader: served
// here when this member leads, otherwise forwarded to the leader over one gRPC stream
// (forward/) and its answer relayed. Reads (get_status, queries) are served locally after
// a ReadIndex barrier, so they are linearizable on every member without loading the leader.
//
// A submission follows the leader until one answers it. Every submission carries an
// idempotency key (the client's request_id, or one this member makes up), so sending it
// again, to the same or another leader, can never create a second job: the state machine
// returns the job already recorded for that key (meta/jobs.ts applyJobSubmitted, and
// ManagerService checks the key before validating). So when this member learns of a new
// leader while a submission is in flight (forwarded to a leader that was cut off, or
// proposed here before this member lost leadership), it re-sends it to the new leader at
// once instead of waiting out the forward timeout (issue 12, defect 3).

import { randomUUID } from 'node:crypto';
import { errorEntryByCode, KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import type { NodeId } from '@kcm/raft';
import type { JobService, JobStatusView, SubmitContext } from '../gateway/job-service';
import type { SubmitReply } from './forward/forward-proto';
import { LeaderLink } from './forward/leader-link';
import { LEADER_CHANGED, LeaderChanges } from '../group/leader-changes';
import { raftAddressOf } from '../group/members';

/** Prefix of the idempotency keys a member gives submissions that came without a request_id. */
export const AUTO_REQUEST_ID_PREFIX = 'kcm-auto-';

/** After a leader failed to answer, how long to wait for news of another before asking again. */
const RESEND_PAUSE_MS = 200;

export interface RoutingDeps {
  local: JobService;
  self: NodeId;
  /** The leader as this member knows it, or null during an election. */
  leader(): NodeId | null;
  /** Registers `listener`, called each time leader() changes (RaftNode's 'leaderChange'). */
  onLeaderChange?(listener: () => void): void;
  /** How long one submission may take, re-sends included. Default 15 s. */
  forwardTimeoutMs?: number;
}

export class RoutingService implements JobService {
  private readonly link = new LeaderLink();
  /** Submissions waiting for the next leader change (one listener on the node serves them all). */
  private readonly leaderChanges = new LeaderChanges();

  constructor(private readonly deps: RoutingDeps) {
    deps.onLeaderChange?.(() => this.leaderChanges.notify());
  }

  /** Closes the streams to the leader. */
  close(): void {
    this.link.close();
  }

  async submitJob(req: ValidRequest, context: SubmitContext = {}): Promise<{ jobId: string }> {
    if (context.forwardedBy) {
      // Forwarded to us: answered here, or refused; the member that forwarded it follows the leader.
      if (this.deps.leader() === this.deps.self) return this.deps.local.submitJob(req, context);
      throw KcmError.of('NO_LEADER', `leadership moved while the request was forwarded from ${context.forwardedBy}; retry`);
    }
    if (this.deps.leader() === null) throw noLeaderKnown();
    const envelope = withRequestId(req.envelope as unknown as Record<string, unknown>);
    return this.submit(envelope, context, { ...req, envelope: envelope as unknown as ValidRequest['envelope'] });
  }

  relaySubmission(envelope: Record<string, unknown>, context: SubmitContext): Promise<{ jobId: string }> | null {
    const leader = this.deps.leader();
    if (leader === null || leader === this.deps.self || context.forwardedBy) return null;
    return this.submit(withRequestId(envelope), context);
  }

  getStatus(jobId: string, context?: SubmitContext): Promise<JobStatusView> {
    return this.deps.local.getStatus(jobId, context);
  }

  runQuery(req: ValidRequest, context?: SubmitContext): Promise<Record<string, unknown>> {
    return this.deps.local.runQuery(req, context);
  }

  /** Dry runs are answered by any member: validation reads the state through ReadIndex. */
  planJob(req: ValidRequest): Promise<Record<string, unknown>> {
    if (!this.deps.local.planJob) throw KcmError.of('UNSUPPORTED', 'paras.dry_run: this member does not answer dry runs', { field: 'paras.dry_run' });
    return this.deps.local.planJob(req);
  }

  /**
   * Hands a keyed submission to the leader (this member, or the one it forwards to) and
   * follows leadership until a leader answers: a leader change while it is in flight, or a
   * leader that fails to answer (its stream broke, it lost leadership with the entry
   * pending), sends it again to the leader known then. A refusal (validation, conflict, ...)
   * is the answer. Gives up at the deadline with an "outcome unknown" NO_LEADER (TIMEOUT when
   * the last leader's commit timed out) naming the request_id to retry with.
   */
  private async submit(envelope: Record<string, unknown>, context: SubmitContext, parsed?: ValidRequest): Promise<{ jobId: string }> {
    const deadline = Date.now() + (this.deps.forwardTimeoutMs ?? 15_000);
    const requestId = typeof envelope.request_id === 'string' ? envelope.request_id : undefined;
    let lastFailure = 'no answer';
    /** NO_LEADER, or TIMEOUT when the last leader's commit timed out: the final answer keeps that code. */
    let lastCode: 'NO_LEADER' | 'TIMEOUT' = 'NO_LEADER';
    for (;;) {
      const leader = this.deps.leader();
      if (leader !== null) {
        const changed = this.leaderChanges.next();
        const attempt = leader === this.deps.self ? this.submitHere(envelope, context, parsed) : this.forwardOnce(leader, envelope, context, deadline);
        try {
          const result = await Promise.race([attempt, changed.changed]);
          if (result !== LEADER_CHANGED) return result;
          attempt.catch(() => {}); // abandoned: the re-send gets the same job, or its answer
          lastFailure = `leadership moved from ${leader}`;
          lastCode = 'NO_LEADER';
          continue;
        } catch (err) {
          // Only an unanswered submission is sent again, and only with a key (one without is malformed: refused anyway).
          if (!KcmError.is(err, 'NO_LEADER') && !KcmError.is(err, 'TIMEOUT')) throw err;
          if (requestId === undefined) throw err;
          lastFailure = `${leader === this.deps.self ? 'this member' : `the leader ${leader}`} did not answer: ${(err as Error).message.replace(/^outcome unknown: /, '')}`;
          lastCode = KcmError.is(err, 'TIMEOUT') ? 'TIMEOUT' : 'NO_LEADER';
        } finally {
          changed.stop();
        }
      }
      if (Date.now() >= deadline) break;
      // A pause, cut short by news of a leader: the failed one may be gone for good, or back in a moment.
      await this.leaderChanges.within(Math.min(deadline, Date.now() + RESEND_PAUSE_MS));
    }
    throw outcomeUnknown(requestId, lastFailure, lastCode);
  }

  /** This member leads: its own JobService validates and commits (the leader validates every submission). */
  private async submitHere(envelope: Record<string, unknown>, context: SubmitContext, parsed: ValidRequest | undefined): Promise<{ jobId: string }> {
    const here = { ...context, receivedBy: context.receivedBy ?? this.deps.self };
    if (parsed) return this.deps.local.submitJob(parsed, here);
    const request = parseRequest(envelope);
    if (!request.ok) throw request.error;
    return this.deps.local.submitJob(request.request, here);
  }

  /** One send to `leader`: resolves with the job id it answered, or throws the error it answered. */
  private async forwardOnce(leader: NodeId, envelope: Record<string, unknown>, context: SubmitContext, deadline: number): Promise<{ jobId: string }> {
    let reply: SubmitReply;
    try {
      // The leader keeps the log request id, so both members' lines about this request share
      // it; it applies the identity this member authenticated (forward-server.ts).
      const request = {
        envelope_json: JSON.stringify(envelope),
        request_id: context.requestId ?? '',
        forwarded_by: this.deps.self,
        identity_name: context.identity?.name ?? '',
        identity_role: context.identity?.role ?? '',
        client_address: context.clientAddress ?? '',
      };
      reply = await this.link.submit(raftAddressOf(leader), request, Math.max(1, deadline - Date.now()));
    } catch (err) {
      throw KcmError.of('NO_LEADER', `the leader ${leader} did not answer the forwarded request: ${(err as Error).message}`, { cause: err });
    }
    if (reply.error_code !== 0) throw relayedError(reply);
    return { jobId: reply.job_id };
  }
}

/**
 * The envelope with an idempotency key: the client's request_id when it sent one (even a
 * malformed one: the leader's validation refuses it, naming the field), else a fresh key
 * of this member's. Random, so no two submissions ever share one; made once per
 * submission, so every re-send of it carries the same one.
 */
export function withRequestId(envelope: Record<string, unknown>): Record<string, unknown> {
  if (envelope.request_id !== undefined) return envelope;
  return { ...envelope, request_id: `${AUTO_REQUEST_ID_PREFIX}${randomUUID()}` };
}

function noLeaderKnown(): KcmError {
  return KcmError.of('NO_LEADER', 'no leader is known right now (election in progress or quorum lost); retry shortly');
}

/** The plain statement a client needs when a submission may or may not have created its job. */
export function outcomeUnknown(requestId: string | undefined, why: string, code: 'NO_LEADER' | 'TIMEOUT' = 'NO_LEADER'): KcmError {
  const retry = requestId === undefined ? 'retry' : `retry with request_id ${JSON.stringify(requestId)}: a retry with the same request_id returns that job and never creates a second one`;
  return KcmError.of(code, `outcome unknown: the job may or may not have been created (${why}); ${retry}`);
}

function relayedError(reply: SubmitReply): KcmError {
  const entry = errorEntryByCode(reply.error_code);
  return KcmError.of(entry?.name ?? 'INTERNAL', reply.error_info || `the leader answered error ${reply.error_code}`);
}

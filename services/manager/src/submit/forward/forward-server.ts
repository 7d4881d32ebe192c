// The leader's side of proto/manager-forward.proto: each forwarded envelope is answered by
// the gateway's own answerEmit (same validation, same JobService) as one POSTed to this
// member; replies leave in batches, one per event-loop turn.

import type * as grpc from '@grpc/grpc-js';
import { KcmError, isRole, type Identity } from '@kcm/protocol';
import type { Logger } from '@kcm/common';
import type { JobService } from '../../gateway/job-service';
import { answerEmit, errorAnswer, type EmitAnswer } from '../../gateway/emit-route';
import type { SubmitBatch, SubmitReply, SubmitReplyBatch, SubmitRequest } from './forward-proto';

type SubmitCall = grpc.ServerDuplexStream<SubmitBatch, SubmitReplyBatch>;

/** One forwarded submission, answered as the gateway would answer it: the job id, or the error the client is to see. */
export async function answerForwarded(request: SubmitRequest, service: JobService, logger: Logger): Promise<SubmitReply> {
  const fields = { reqId: request.request_id, forwardedBy: request.forwarded_by };
  let answer: EmitAnswer;
  try {
    const body: unknown = JSON.parse(request.envelope_json);
    answer = await answerEmit(body, service, request.request_id, (err) => logger.error({ ...fields, err }, 'job service failed on a forwarded submission'), {
      forwardedBy: request.forwarded_by,
      requestId: request.request_id,
      identity: forwardedIdentity(request),
      clientAddress: request.client_address,
      receivedBy: request.forwarded_by,
    });
  } catch {
    answer = errorAnswer(KcmError.of('BAD_JSON', 'the forwarded envelope is not JSON'), '', '');
  }
  const { record, reply } = answer;
  logger.debug({ ...fields, job_type: record.sentJobType, outcome: record.outcome, job_id: record.jobId }, 'forwarded submission answered');
  return { id: request.id, job_id: reply.job_id, error_code: Number(reply.error_code), error_info: reply.error_info };
}

/** The identity the forwarding member authenticated; undefined (refused) when it sent none. */
export function forwardedIdentity(request: Pick<SubmitRequest, 'identity_name' | 'identity_role'>): Identity | undefined {
  if (request.identity_name === '' || !isRole(request.identity_role)) return undefined;
  return { name: request.identity_name, role: request.identity_role };
}

/**
 * The Forward service's implementation, serving `service` (the member's RoutingService;
 * undefined while the member is still starting: its gRPC port opens with Raft's).
 */
export function forwardServiceImplementation(service: () => JobService | undefined, logger: Logger): grpc.UntypedServiceImplementation {
  const starting = (request: SubmitRequest): SubmitReply => {
    const error = KcmError.of('NO_LEADER', 'the leader is still starting; retry');
    return { id: request.id, job_id: '', error_code: error.code, error_info: error.message };
  };
  return {
    Submit(call: SubmitCall) {
      let outbox: SubmitReply[] = [];
      const send = (reply: SubmitReply) => {
        outbox.push(reply);
        if (outbox.length > 1) return;
        queueMicrotask(() => {
          const replies = outbox;
          outbox = [];
          if (!call.cancelled && call.writable) call.write({ replies });
        });
      };
      call.on('data', (batch: SubmitBatch) => {
        for (const request of batch.requests) {
          const target = service();
          if (target) void answerForwarded(request, target, logger).then(send);
          else send(starting(request));
        }
      });
      call.on('end', () => call.end());
      call.on('error', () => {}); // the follower went away; its pending submissions fail over there
    },
  };
}

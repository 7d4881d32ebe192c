// The leader's side of proto/manager-forward.proto: each forwarded envelope goes through
// the same validation (parseRequest) and the same JobService as one POSTed to this
// member's gateway; replies leave in batches, one per event-loop turn.

import type * as grpc from '@grpc/grpc-js';
import { KcmError, parseRequest } from '@kcm/protocol';
import type { Logger } from '@kcm/common';
import type { JobService } from '../gateway/job-service';
import { asKcmError } from '../gateway/emit-route';
import type { SubmitBatch, SubmitReply, SubmitReplyBatch, SubmitRequest } from './forward-proto';

type SubmitCall = grpc.ServerDuplexStream<SubmitBatch, SubmitReplyBatch>;

/** One forwarded submission, answered: the job id, or the error the client is to see. */
export async function answerForwarded(request: SubmitRequest, service: JobService, logger: Logger): Promise<SubmitReply> {
  const reply = (jobId: string, err?: KcmError): SubmitReply => ({ id: request.id, job_id: jobId, error_name: err?.errorName ?? '', error_info: err?.message ?? '' });
  let body: unknown;
  try {
    body = JSON.parse(request.envelope_json);
  } catch {
    return reply('', KcmError.of('BAD_JSON', 'the forwarded envelope is not JSON'));
  }
  const parsed = parseRequest(body);
  if (!parsed.ok) return reply('', parsed.error);
  const context = { forwardedBy: request.forwarded_by, requestId: request.request_id };
  try {
    const { jobId } = await service.submitJob(parsed.request, context);
    logger.debug({ reqId: request.request_id, forwardedBy: request.forwarded_by, jobType: parsed.request.sentJobType, jobId }, 'forwarded submission accepted');
    return reply(jobId);
  } catch (err) {
    if (!(err instanceof KcmError)) logger.error({ reqId: request.request_id, forwardedBy: request.forwarded_by, err }, 'job service failed on a forwarded submission');
    const error = asKcmError(err, request.request_id);
    logger.debug({ reqId: request.request_id, forwardedBy: request.forwarded_by, error_code: error.code, error: error.message }, 'forwarded submission refused');
    return reply('', error);
  }
}

/**
 * The Forward service's implementation, serving `service` (the member's RoutingService;
 * undefined while the member is still starting: its gRPC port opens with Raft's).
 */
export function forwardServiceImplementation(service: () => JobService | undefined, logger: Logger): grpc.UntypedServiceImplementation {
  const starting = (request: SubmitRequest): SubmitReply => ({ id: request.id, job_id: '', error_name: 'NO_LEADER', error_info: 'the leader is still starting; retry' });
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

// Adapts an async capability to a grpc unary handler; a failure becomes the status code of
// its kind (agentStatusOf: invalid argument, not found, instance failed, ...; INTERNAL only
// for an agent bug) with its message (capabilities build their messages without secrets)
// and one log line.

import * as grpc from '@grpc/grpc-js';
import type { Logger } from '@kcm/common';
import { agentStatusOf } from '@kcm/agent-api';

export function unary<Req, Res>(logger: Logger, name: string, run: (req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    run(call.request).then(
      (reply) => callback(null, reply),
      (err: unknown) => {
        logger.error({ err, rpc: name }, 'agent command failed');
        callback({ code: agentStatusOf(err), details: err instanceof Error ? err.message : String(err) });
      },
    );
  };
}

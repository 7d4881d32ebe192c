// The manager's side of the agent contract: typed promises over the gRPC client,
// each with a deadline, so an unreachable agent becomes a clear error, not a hang.

import * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { AgentService, type HealthReply, type HostFactsReply, type PrepareDirsReply, type WatchRequest } from '../contract/agent';
import { agentCallFailure } from '../errors';

export class AgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 5000) {
    this.client = agentClient(AgentService, address);
  }

  health(): Promise<HealthReply> {
    return this.call('Health', {});
  }

  /**
   * Health as a stream (Agent.Watch): `onBeat` for the reply the agent sends at once and then
   * every intervalMs. Settles when the stream ends: resolves when `signal` ended it; rejects
   * with AgentUnreachableError when the link failed, or AgentCallError (UNIMPLEMENTED from an
   * agent older than Watch). No deadline: it lasts as long as the caller listens.
   */
  watch(intervalMs: number, onBeat: (reply: HealthReply) => void, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return resolve();
      const request: WatchRequest = { interval_ms: intervalMs };
      const call = (this.client as unknown as { Watch(req: WatchRequest, md: grpc.Metadata): grpc.ClientReadableStream<HealthReply> }).Watch(request, new grpc.Metadata());
      const cancel = () => call.cancel();
      signal.addEventListener('abort', cancel, { once: true });
      call.on('data', onBeat);
      const settle = (err?: grpc.ServiceError) => {
        signal.removeEventListener('abort', cancel);
        if (signal.aborted || !err) resolve();
        else reject(agentCallFailure(this.address, err));
      };
      call.on('error', settle);
      // A stream the agent ended without an error (it does not, but a proxy might) is over too.
      call.on('end', () => settle());
    });
  }

  hostFacts(dirs: string[]): Promise<HostFactsReply> {
    return this.call('HostFacts', { dirs });
  }

  prepareDirs(opId: string, dirs: string[]): Promise<PrepareDirsReply> {
    return this.call('PrepareDirs', { op_id: opId, dirs });
  }

  close(): void {
    this.client.close();
  }

  private call<Res>(method: string, request: object): Promise<Res> {
    return callUnary<Res>(this.client, this.address, method, request, this.deadlineMs);
  }
}

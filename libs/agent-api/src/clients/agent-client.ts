// The manager's side of the agent contract: typed promises over the gRPC client,
// each with a deadline, so an unreachable agent becomes a clear error, not a hang.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary, listenToStream } from '../call';
import { AgentService, type HealthReply, type HostFactsReply, type PrepareDirsReply, type WatchRequest } from '../contract/agent';

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
    const request: WatchRequest = { interval_ms: intervalMs };
    return listenToStream(this.client, this.address, 'Watch', request, onBeat, signal);
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

// The manager's side of the agent contract: typed promises over the gRPC client,
// each with a deadline, so an unreachable agent becomes a clear error, not a hang.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { AgentService, type HealthReply, type HostFactsReply, type PrepareDirsReply } from '../contract/agent';

export class AgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 5000) {
    this.client = agentClient(AgentService, address);
  }

  health(): Promise<HealthReply> {
    return this.call('Health', {});
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

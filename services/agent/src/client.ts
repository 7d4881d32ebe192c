// The manager's side of the agent contract: typed promises over the gRPC client,
// each with a deadline, so an unreachable agent becomes a clear error, not a hang.

import * as grpc from '@grpc/grpc-js';
import { AgentService, type HealthReply, type HostFactsReply, type PrepareDirsReply } from './agent-proto';
import { agentChannelOptions } from './channel-options';

export class AgentUnreachableError extends Error {
  constructor(readonly address: string, cause: unknown) {
    super(`agent at ${address} is unreachable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'AgentUnreachableError';
  }
}

export class AgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 5000) {
    this.client = new AgentService(address, grpc.credentials.createInsecure(), agentChannelOptions);
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
    const fn = (this.client as unknown as Record<string, Function>)[method].bind(this.client);
    return new Promise<Res>((resolve, reject) => {
      fn(request, { deadline: Date.now() + this.deadlineMs }, (err: grpc.ServiceError | null, reply: Res) => {
        if (!err) return resolve(reply);
        const unreachable = err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED;
        reject(unreachable ? new AgentUnreachableError(this.address, err) : err);
      });
    });
  }
}

// The manager's side of the HostProbeAgent service: every named instance of one host
// measured in one call (get_cluster_summary at fleet scale). An agent older than the
// service answers UNIMPLEMENTED: isUnimplemented tells the caller to probe per instance.

import * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { AgentCallError } from '../errors';
import { HostProbeAgentService, type ProbeHostReply, type ProbeHostRequest } from '../contract/host-probe';

export class HostProbeAgentClient {
  private readonly client: grpc.Client;

  /** The deadline of the whole call: the agent measures a host's instances several at a time. */
  constructor(readonly address: string, private readonly deadlineMs = 4000) {
    this.client = agentClient(HostProbeAgentService, address);
  }

  probeHost(request: ProbeHostRequest): Promise<ProbeHostReply> {
    return callUnary(this.client, this.address, 'ProbeHost', request, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}

/** True when the agent does not serve the call (an agent older than the manager, during an upgrade). */
export function isUnimplemented(err: unknown): boolean {
  return err instanceof AgentCallError && err.code === grpc.status.UNIMPLEMENTED;
}

// The manager's side of the PasswordAgent service (rotate_cluster_passwords).

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import {
  PasswordAgentService,
  type MariaDbAccountRole,
  type SetComputePasswordReply,
  type SetMariaDbPasswordsReply,
  type SetReplicationPasswordReply,
} from '../contract/passwords';

export interface RoleAccount {
  role: MariaDbAccountRole;
  user: string;
  password: string;
}

export class PasswordAgentClient {
  private readonly client: grpc.Client;

  /** A replication restart waits for the standby to run again (up to 20 s on the agent). */
  constructor(readonly address: string, private readonly deadlineMs = 40_000) {
    this.client = agentClient(PasswordAgentService, address);
  }

  setMariaDbPasswords(opId: string, port: number, accounts: RoleAccount[]): Promise<SetMariaDbPasswordsReply> {
    return callUnary(this.client, this.address, 'SetMariaDbPasswords', { op_id: opId, port, accounts }, this.deadlineMs);
  }

  setReplicationPassword(opId: string, port: number, account: { user: string; password: string }): Promise<SetReplicationPasswordReply> {
    return callUnary(this.client, this.address, 'SetReplicationPassword', { op_id: opId, port, ...account }, this.deadlineMs);
  }

  setComputePassword(opId: string, port: number, account: { user: string; password: string }): Promise<SetComputePasswordReply> {
    return callUnary(this.client, this.address, 'SetComputePassword', { op_id: opId, port, ...account }, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}

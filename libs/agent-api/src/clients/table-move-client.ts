// The manager's side of the TableMoveAgent service (a table move's cut-over on a compute node).

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { TableMoveAgentService, type ForeignTableServerReply, type HoldForeignTableReply, type ReleaseForeignTableReply, type RepointForeignTableReply } from '../contract/table-move';

export interface ForeignTableRef {
  port: number;
  database: string;
  schema: string;
  table: string;
}

export class TableMoveAgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 10_000) {
    this.client = agentClient(TableMoveAgentService, address);
  }

  /** `prepareFor`: the server the re-point will name, so the agent makes the replacement before it locks. */
  hold(holdId: string, ref: ForeignTableRef, holdMs: number, prepareFor = ''): Promise<HoldForeignTableReply> {
    return callUnary(this.client, this.address, 'HoldForeignTable', { hold_id: holdId, ...ref, hold_ms: holdMs, server: prepareFor }, this.deadlineMs);
  }

  repoint(holdId: string, server: string): Promise<RepointForeignTableReply> {
    return callUnary(this.client, this.address, 'RepointForeignTable', { hold_id: holdId, server }, this.deadlineMs);
  }

  release(holdId: string): Promise<ReleaseForeignTableReply> {
    return callUnary(this.client, this.address, 'ReleaseForeignTable', { hold_id: holdId }, this.deadlineMs);
  }

  server(ref: ForeignTableRef): Promise<ForeignTableServerReply> {
    return callUnary(this.client, this.address, 'ForeignTableServer', ref, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}

// The manager's side of the RelationSwitchAgent service: repartition's switch of names on a
// compute node when a side is a partitioned table (jobs/repartition/parent-switch.ts).

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { RelationSwitchAgentService, type HoldRelationsReply, type RelationRef, type RelationRename, type ReleaseRelationsReply, type SwitchRelationsReply } from '../contract/table-move';

export class RelationSwitchAgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 10_000) {
    this.client = agentClient(RelationSwitchAgentService, address);
  }

  hold(holdId: string, at: { port: number; database: string }, relations: RelationRef[], holdMs: number): Promise<HoldRelationsReply> {
    return callUnary(this.client, this.address, 'HoldRelations', { hold_id: holdId, port: at.port, database: at.database, relations, hold_ms: holdMs }, this.deadlineMs);
  }

  switch(holdId: string, renames: RelationRename[]): Promise<SwitchRelationsReply> {
    return callUnary(this.client, this.address, 'SwitchRelations', { hold_id: holdId, renames }, this.deadlineMs);
  }

  release(holdId: string): Promise<ReleaseRelationsReply> {
    return callUnary(this.client, this.address, 'ReleaseRelations', { hold_id: holdId }, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}

// The manager's side of the ShardRoutingAgent service: hold and release a shard on a
// compute node around a change of its master. An agent older than the service answers
// UNIMPLEMENTED (isUnimplemented): the caller goes on without the hold for that node.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { ShardRoutingAgentService, type HoldShardReply, type ReleaseShardReply } from '../contract/shard-routing';

/** Beyond the drain, what the agent needs to open its session and set the hold. */
const HOLD_CALL_MARGIN_MS = 3000;

export class ShardRoutingAgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 5000) {
    this.client = agentClient(ShardRoutingAgentService, address);
  }

  /** Answers once the drain is over: its deadline is the drain's plus a margin. */
  holdShard(port: number, shardId: string, holdMs: number, drainMs: number): Promise<HoldShardReply> {
    return callUnary(this.client, this.address, 'HoldShard', { port, shard_id: shardId, hold_ms: holdMs, drain_ms: drainMs }, drainMs + HOLD_CALL_MARGIN_MS);
  }

  releaseShard(port: number, shardId: string): Promise<ReleaseShardReply> {
    return callUnary(this.client, this.address, 'ReleaseShard', { port, shard_id: shardId }, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}

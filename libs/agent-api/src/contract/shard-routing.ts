// Loads proto/agent-shard-routing.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled). The
// ShardRoutingAgent service: a compute node holds a shard while its master changes.

import { loadAgentService } from '../load-proto';

export const ShardRoutingAgentService = loadAgentService('agent-shard-routing.proto', 'ShardRoutingAgent');

export interface HoldShardRequest {
  port: number;
  shard_id: string;
  hold_ms: number;
  drain_ms: number;
}

export interface HoldShardReply {
  open_at_start: number;
  drain_ms: number;
  ended: number;
}

export interface ReleaseShardRequest {
  port: number;
  shard_id: string;
}

export interface ReleaseShardReply {
  was_held: boolean;
}

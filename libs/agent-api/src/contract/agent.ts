// Loads proto/agent.proto at run time (no generated code to go stale) and states the
// TypeScript shapes of its messages beside it, as proto-loader decodes them.

import { loadAgentService } from '../load-proto';

export const AgentService = loadAgentService('agent.proto', 'Agent');

export interface HealthReply {
  hostaddr: string;
  version: string;
  uptime_ms: number;
  pid: number;
}

export interface WatchRequest {
  interval_ms: number;
}

export interface HostFactsRequest {
  dirs: string[];
}

export interface HostFactsReply {
  cores: number;
  memory_mb: number;
  disks: { dir: string; free_bytes: number }[];
  mariadb_installed: boolean;
  postgres_installed: boolean;
}

export interface PrepareDirsRequest {
  op_id: string;
  dirs: string[];
}

export interface PrepareDirsReply {
  problems: { dir: string; reason: string }[];
}

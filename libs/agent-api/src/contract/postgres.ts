// Loads proto/agent-postgres.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, int64 as number, defaults filled in).

import { loadAgentService } from '../load-proto';

export const PostgresAgentService = loadAgentService('agent-postgres.proto', 'PostgresAgent');

export interface InstallPostgresRequest {
  op_id: string;
  comp_datadir: string;
  port: number;
  user: string;
  password: string;
  variables?: Record<string, string>;
  /** "15.18"; '' or absent = the version the instance runs already, or the agent's default. */
  engine_version?: string;
}

export interface PostgresInstanceRequest {
  op_id: string;
  port: number;
  /** RemovePostgres only: where the install put it, for a data dir with no registry entry. */
  comp_datadir?: string;
}

export interface PostgresInstanceReply {
  port: number;
  datadir: string;
  pid: number;
  running: boolean;
  user: string;
  detail: string;
  /** InstallPostgres: SHOW server_version, e.g. 15.18; '' otherwise (or from an older agent). */
  server_version?: string;
}

export interface ProbePostgresRequest {
  port: number;
}

export interface ProbePostgresReply {
  installed: boolean;
  running: boolean;
  pid: number;
  accepting: boolean;
  version: string;
  problem: string;
  /** Times the agent's supervisor restarted this instance after finding it down. */
  supervisor_restarts?: number;
  /** running | stopped; '' when the agent has no desired state for it. */
  desired_state?: string;
}

export interface ShardEndpoint {
  shard_id: string;
  host: string;
  port: number;
  user: string;
  password: string;
}

export interface SyncCatalogRequest {
  op_id: string;
  port: number;
  shards: ShardEndpoint[];
}

export type CatalogAction = 'imported' | 'dropped' | 'reimported' | 'altered' | 'skipped';

export interface CatalogChange {
  database: string;
  schema: string;
  table: string;
  action: CatalogAction;
  shard_id: string;
  reason: string;
}

export interface SyncCatalogReply {
  changes: CatalogChange[];
  servers_changed: string[];
  foreign_tables: number;
  elapsed_ms: number;
}

export interface SetPostgresVariablesRequest {
  op_id: string;
  port: number;
  variables: Record<string, string>;
}

export interface GetPostgresVariablesRequest {
  port: number;
  names: string[];
}

export interface PostgresVariablesReply {
  variables: { name: string; value: string; pending_restart: boolean }[];
}

/** PreparePostgresEngine: fetch an engine version into the host's cache ('' = the agent's default). */
export interface PreparePostgresEngineRequest {
  op_id: string;
  version: string;
}

export interface PreparePostgresEngineReply {
  version: string;
  /** Debian build it came from, e.g. 15.18-0+deb12u1. */
  debian_version: string;
  dir: string;
}

export interface UpgradePostgresEngineRequest {
  op_id: string;
  port: number;
  version: string;
}

export interface UpgradePostgresEngineReply {
  port: number;
  /** SHOW server_version of the running instance before and after the switch. */
  version_before: string;
  version_after: string;
  engine_version: string;
  pid: number;
  detail: string;
}

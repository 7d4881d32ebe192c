// Loads proto/agent-mariadb.proto at run time and states the TypeScript shapes of its
// messages as proto-loader decodes them (keepCase, longs as numbers, defaults filled).

import { loadAgentService } from '../load-proto';

export const MariaDbAgentService = loadAgentService('agent-mariadb.proto', 'MariaDbAgent');

export interface MariaDbInstanceSpec {
  port: number;
  datadir: string;
  logdir: string;
  wal_log_dir: string;
  server_id: number;
  innodb_size_mb: number;
  max_connections: number;
  dbcfg: number;
  fullsync_level: number;
  /** "10.11.18"; '' or absent = the version it runs already, or the agent's default. The agent records what it chose. */
  engine_version?: string;
}

export interface MariaDbAccount {
  user: string;
  password: string;
}

export interface MariaDbInstallRequest {
  op_id: string;
  spec: MariaDbInstanceSpec;
  admin: MariaDbAccount;
  replication: MariaDbAccount;
  storage: MariaDbAccount;
  storage_db_patterns: string[];
}

export interface MariaDbInstanceCommand {
  op_id: string;
  port: number;
}

export type MariaDbInstanceState = 'online' | 'stopped' | 'removed';

export interface MariaDbInstanceReply {
  port: number;
  state: MariaDbInstanceState;
  pid: number;
  instance_dir: string;
  socket: string;
  /** Anything the command did that the caller should know (e.g. directories set aside); '' otherwise. */
  detail?: string;
  /** Install: the version the server reports (SELECT VERSION(), e.g. 10.11.18); '' otherwise (or from an older agent). */
  server_version?: string;
}

export type MariaDbRole = 'master' | 'standby';

export interface MariaDbReplicationRequest {
  op_id: string;
  port: number;
  role: MariaDbRole;
  master_host: string;
  master_port: number;
  replication: MariaDbAccount;
  fullsync_level: number;
}

export interface MariaDbReplicationReply {
  role: MariaDbRole;
  semi_sync_master: boolean;
  semi_sync_slave: boolean;
  read_only: boolean;
}

export interface MariaDbBackupSource {
  agent_address: string;
  hostaddr: string;
  port: number;
  is_master: boolean;
}

export interface MariaDbRebuildRequest {
  op_id: string;
  spec: MariaDbInstanceSpec;
  admin: MariaDbAccount;
  sources: MariaDbBackupSource[];
  allow_replica_delay_s: number;
  allow_pull_from_master: boolean;
  pv_limit_mb: number;
  need_backup: boolean;
  master_host: string;
  master_port: number;
  replication: MariaDbAccount;
}

export interface MariaDbRebuildReply {
  source_hostaddr: string;
  source_port: number;
  gtid_pos: string;
  bytes: number;
  transfer_ms: number;
  kept_old_data: string;
  pid: number;
}

export interface MariaDbStreamBackupRequest {
  port: number;
  pv_limit_mb: number;
}

export interface MariaDbBackupChunk {
  data: Buffer;
}

export interface MariaDbVariablesRequest {
  port: number;
  names: string[];
}

export interface MariaDbVariablesReply {
  variables: { name: string; value: string }[];
}

export interface MariaDbListTablesRequest {
  port: number;
}

export interface MariaDbListTablesReply {
  /** `database.table`, sorted. */
  tables: string[];
}

export interface MariaDbProbeRequest {
  port: number;
}

export type MariaDbProbeState = 'online' | 'offline' | 'unknown';

export interface MariaDbProbeReply {
  port: number;
  state: MariaDbProbeState;
  pid: number;
  reason: string;
  is_replica: boolean;
  io_running: boolean;
  sql_running: boolean;
  seconds_behind_master: number;
  last_error: string;
  gtid_current_pos: string;
  read_only: boolean;
  semi_sync_master: boolean;
  semi_sync_master_clients: number;
  master_host: string;
  master_port: number;
  /** Times the agent's supervisor restarted this instance after finding it down. */
  supervisor_restarts: number;
  /** running | stopped; '' when the agent has no desired state for it. */
  desired_state: string;
}

/** PrepareEngine: fetch an engine version into the host's cache ('' = the agent's default). */
export interface MariaDbPrepareEngineRequest {
  op_id: string;
  version: string;
}

export interface MariaDbPrepareEngineReply {
  /** The version prepared (the default's when none was named). */
  version: string;
  /** Debian build it came from, e.g. 1:10.11.18-0+deb12u1. */
  debian_version: string;
  /** Its directory in the engine cache. */
  dir: string;
}

export interface MariaDbUpgradeEngineRequest {
  op_id: string;
  port: number;
  version: string;
}

export interface MariaDbUpgradeEngineReply {
  port: number;
  /** SELECT VERSION() of the running instance before and after the switch. */
  version_before: string;
  version_after: string;
  /** The version the instance's record names now. */
  engine_version: string;
  pid: number;
  detail: string;
}

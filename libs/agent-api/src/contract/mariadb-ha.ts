// Loads proto/agent-mariadb-ha.proto at run time and states the TypeScript shapes of its
// messages as proto-loader decodes them (keepCase, longs as numbers, defaults filled).
// The MariaDbHaAgent service: replication status, promote, re-point, fence, wait for a
// GTID, what failover and manual_switch are made of; and the XA branches compute nodes
// leave prepared, what the in-doubt resolver reads and ends.

import { loadAgentService } from '../load-proto';

export const MariaDbHaAgentService = loadAgentService('agent-mariadb-ha.proto', 'MariaDbHaAgent');

export interface MariaDbHaStatusRequest {
  port: number;
  /** > 0: a standby's agent tries a TCP connection to its master within this many ms. */
  check_master_ms: number;
}

export interface MariaDbHaWatchRequest {
  ports: number[];
  interval_ms: number;
}

export interface MariaDbHaWatchBeat {
  statuses: MariaDbHaStatusReply[];
}

export interface MariaDbHaStatusReply {
  port: number;
  installed: boolean;
  running: boolean;
  answering: boolean;
  pid: number;
  reason: string;
  read_only: boolean;
  gtid_current_pos: string;
  gtid_slave_pos: string;
  gtid_binlog_pos: string;
  is_replica: boolean;
  io_running: boolean;
  sql_running: boolean;
  master_host: string;
  master_port: number;
  last_io_error: string;
  last_sql_error: string;
  gtid_io_pos: string;
  /** The SQL thread has applied everything the IO thread received. */
  relay_applied: boolean;
  /** Rpl_semi_sync_slave_status: this standby acknowledges semi-sync transactions. */
  semi_sync_slave_active: boolean;
  semi_sync_master_enabled: boolean;
  semi_sync_master_clients: number;
  /** Only meaningful when asked (check_master_ms > 0) and is_replica. */
  master_reachable: boolean;
  supervisor_restarts: number;
  /** running | stopped | ''. */
  desired_state: string;
  /** Fenced (Fence) and given no role since. */
  fenced: boolean;
  /** When the supervisor last restarted it after it died (ms since the epoch; 0: never). */
  supervisor_restarted_at_ms: number;
}

export interface MariaDbHaAccount {
  user: string;
  password: string;
}

export interface MariaDbPromoteRequest {
  op_id: string;
  port: number;
  fullsync_level: number;
  wait_relay_ms: number;
}

export interface MariaDbPromoteReply {
  gtid_current_pos: string;
  semi_sync_master: boolean;
  read_only: boolean;
  already_master: boolean;
  relay_applied: boolean;
}

export interface MariaDbRepointRequest {
  op_id: string;
  port: number;
  master_host: string;
  master_port: number;
  replication: MariaDbHaAccount;
  fullsync_level: number;
}

export interface MariaDbRepointReply {
  gtid_slave_pos: string;
  io_running: boolean;
  sql_running: boolean;
}

export interface MariaDbFenceRequest {
  op_id: string;
  port: number;
  stop: boolean;
}

export interface MariaDbFenceReply {
  was_running: boolean;
  made_read_only: boolean;
  stopped: boolean;
  gtid_binlog_pos: string;
}

export interface MariaDbWaitForGtidRequest {
  port: number;
  gtid: string;
  timeout_ms: number;
}

export interface MariaDbWaitForGtidReply {
  reached: boolean;
  gtid_slave_pos: string;
  gtid_current_pos: string;
}

export interface MariaDbListXaRequest {
  port: number;
}

export interface MariaDbXaBranch {
  /** ASCII `kcm:<coordinator shard id>:<unique part>`. */
  gtrid: string;
  /** ASCII `<participant shard id>.<ordinal>`. */
  bqual: string;
}

export interface MariaDbListXaReply {
  branches: MariaDbXaBranch[];
  /** formatID 7037805 branches not in kcm's ASCII form: left alone, counted. */
  unreadable: number;
}

export interface MariaDbDecideXaRequest {
  port: number;
  gtrid: string;
}

/** `pending`: the coordinator's own decision is being written (a row lock wait): ask again. */
export type XaOutcome = 'commit' | 'abort' | 'pending';

export interface MariaDbDecideXaReply {
  outcome: XaOutcome;
  /** This call wrote the decision (always an abort). */
  decided_now: boolean;
}

export interface MariaDbFinishXaRequest {
  port: number;
  gtrid: string;
  bqual: string;
  /** XA COMMIT; otherwise XA ROLLBACK. */
  commit: boolean;
}

export interface MariaDbFinishXaReply {
  /** This call committed or rolled the branch back (false: already ended, or held). */
  ended: boolean;
  /** Still prepared but held by a live client session, which alone can end it. */
  held: boolean;
}

export interface MariaDbPruneXaRequest {
  port: number;
  older_than_seconds: number;
  keep_gtrids: string[];
}

export interface MariaDbPruneXaReply {
  deleted: number;
}

export interface MariaDbLeasedMaster {
  port: number;
  /** host:port of each standby of its shard. */
  standbys: string[];
}

export interface MariaDbLeaseRenewal {
  lease_ms: number;
  masters: MariaDbLeasedMaster[];
  /** When the leader sent it (ms since the epoch): an agent ignores one older than lease_ms. */
  sent_at_ms: number;
}

export interface MariaDbLeaseReply {
  fenced_ports: number[];
}

export interface MariaDbCutConnectionsRequest {
  host: string;
  port: number;
}

export interface MariaDbCutConnectionsReply {
  closed: number;
}

export interface MariaDbTableChecksumsRequest {
  port: number;
  /** Stop the standby's SQL thread first; end the hold with ResumeApply. */
  hold_apply: boolean;
}

export interface MariaDbTableChecksum {
  database: string;
  table: string;
  rows: number;
  /** CHECKSUM TABLE's figure as text (it can pass 2^53); '' when the table has none. */
  checksum: string;
}

export interface MariaDbTableChecksumsReply {
  /** @@gtid_current_pos, read with the figures (what mariabackup records as a backup's position). */
  gtid_pos: string;
  /** Sorted by database, then table. */
  tables: MariaDbTableChecksum[];
  /** This call stopped the SQL thread. */
  held: boolean;
}

export interface MariaDbResumeApplyRequest {
  port: number;
}

export interface MariaDbResumeApplyReply {
  sql_running: boolean;
}

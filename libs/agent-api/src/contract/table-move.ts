// Loads proto/agent-table-move.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled in).

import { loadAgentService } from '../load-proto';

export const TableMoveAgentService = loadAgentService('agent-table-move.proto', 'TableMoveAgent');

export interface HoldForeignTableRequest {
  hold_id: string;
  port: number;
  database: string;
  schema: string;
  table: string;
  hold_ms: number;
  /** The re-point's server, to prepare the replacement before the lock ('' = none). */
  server: string;
}

export interface HoldForeignTableReply {
  server: string;
  lock_wait_ms: number;
  prepared: boolean;
}

export interface RepointForeignTableRequest {
  hold_id: string;
  server: string;
}

export interface RepointForeignTableReply {
  elapsed_ms: number;
  held_ms: number;
  lock_wait_ms: number;
  wait_ms: number;
  ddl_ms: number;
  commit_ms: number;
}

export interface ReleaseForeignTableRequest {
  hold_id: string;
}

export interface ReleaseForeignTableReply {
  released: boolean;
}

export interface ForeignTableServerRequest {
  port: number;
  database: string;
  schema: string;
  table: string;
}

export interface ForeignTableServerReply {
  server: string;
}

// RelationSwitchAgent: repartition's switch of names for partitioned tables.
export const RelationSwitchAgentService = loadAgentService('agent-table-move.proto', 'RelationSwitchAgent');

export interface RelationRef {
  schema: string;
  table: string;
}

export interface HoldRelationsRequest {
  hold_id: string;
  port: number;
  database: string;
  relations: RelationRef[];
  hold_ms: number;
}

export interface HoldRelationsReply {
  /** The requested relations that exist, `schema.table`. */
  present: string[];
  lock_wait_ms: number;
}

export interface RelationRename {
  schema: string;
  old_name: string;
  new_name: string;
  /** A foreign table's new table_name option ('' = unchanged). */
  remote_table: string;
}

export interface SwitchRelationsRequest {
  hold_id: string;
  renames: RelationRename[];
}

export interface SwitchRelationsReply {
  held_ms: number;
  lock_wait_ms: number;
  wait_ms: number;
  ddl_ms: number;
  commit_ms: number;
  renamed: string[];
}

export interface ReleaseRelationsRequest {
  hold_id: string;
}

export interface ReleaseRelationsReply {
  released: boolean;
}

// Loads proto/agent-shard-data.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled in).

import { loadAgentService } from '../load-proto';

export const ShardDataAgentService = loadAgentService('agent-shard-data.proto', 'ShardDataAgent');

export interface ShardLogin {
  host: string;
  port: number;
  user: string;
  password: string;
}

export interface TableAt {
  login: ShardLogin;
  db: string;
  table: string;
}

export interface KeyColumn {
  name: string;
  ordinal: number;
}

export interface TableShape {
  columns: string[];
  text: string[];
  key: KeyColumn[];
}

export interface BinlogPosition {
  file: string;
  pos: number;
}

export interface OpenSessionRequest {
  login: ShardLogin;
  database: string;
}

export interface OpenSessionReply {
  session_id: string;
}

export interface SessionQueryRequest {
  session_id: string;
  sql: string;
  values_json: string;
  rows_as_array: boolean;
}

export interface SessionQueryReply {
  result_json: string;
}

export interface CloseSessionRequest {
  session_id: string;
}

export interface CloseSessionReply {
  closed: boolean;
}

export interface CopyRowsRequest {
  move_id: string;
  source: TableAt;
  target: TableAt;
  shape: TableShape;
  chunk_rows: number;
  commit_rows: number;
  commit_bytes: number;
  commit_ms: number;
  rows_per_second: number;
  max_target_lag_trx: number;
  target_standbys: ShardLogin[];
  from_start: boolean;
  resume_after_json: string;
}

export interface CopyRowsProgress {
  rows: number;
  chunks: number;
  done: boolean;
  resumed_after_json: string;
  ms: number;
}

export interface MoveRef {
  move_id: string;
}

export interface StartCatchUpRequest {
  move_id: string;
  binlog_login: ShardLogin;
  source: TableAt;
  target: TableAt;
  shape: TableShape;
  start: BinlogPosition;
}

export interface CatchUpState {
  running: boolean;
  applied: BinlogPosition;
  rows_resynced: number;
  rotations_crossed: number;
}

export interface CatchUpToRequest {
  move_id: string;
  at: BinlogPosition;
  timeout_ms: number;
}

export interface CatchUpTailReply {
  flush_ms: number;
  read_ms: number;
  tail_rows: number;
  state: CatchUpState;
}

export interface CompareRequest {
  sources: TableAt[];
  target: TableAt;
  shape: TableShape;
  chunk_rows: number;
  keys_json: string;
}

export interface CompareReply {
  source_rows: number[];
  chunks: number;
  differing_json: string;
  ms: number;
}

// Loads proto/agent-mariadb-tables.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled in).

import { loadAgentService } from '../load-proto';

export const MariaDbTablesAgentService = loadAgentService('agent-mariadb-tables.proto', 'MariaDbTablesAgent');

export interface TableStatsRequest {
  port: number;
}

export interface TableStat {
  database: string;
  table: string;
  data_bytes: number;
  index_bytes: number;
  rows_read: number;
  rows_changed: number;
}

export interface TableStatsReply {
  tables: TableStat[];
  userstat: boolean;
}

export interface TableRef {
  database: string;
  table: string;
}

export interface DescribeTablesRequest {
  port: number;
  tables: TableRef[];
}

export interface ColumnDefinition {
  name: string;
  ordinal: number;
  column_type: string;
  data_type: string;
  nullable: boolean;
  has_default: boolean;
  character_set: string;
  char_max_length: number;
  numeric_precision: number;
  numeric_scale: number;
  datetime_precision: number;
  extra: string;
}

export interface UniqueKey {
  name: string;
  columns: string[];
}

export interface CheckConstraint {
  name: string;
  clause: string;
}

export interface TableDescription {
  database: string;
  table: string;
  exists: boolean;
  table_type: string;
  columns: ColumnDefinition[];
  unique_keys: UniqueKey[];
  checks: CheckConstraint[];
}

export interface DescribeTablesReply {
  tables: TableDescription[];
}

export interface RowProbe {
  null_column: string;
  duplicate_columns: string[];
  false_check: string;
}

export interface ProbeRowsRequest {
  port: number;
  table: TableRef | null;
  probes: RowProbe[];
}

export interface ProbeResult {
  violations: number;
  example: string;
}

export interface ProbeRowsReply {
  results: ProbeResult[];
}

// Loads proto/agent-mariadb-logical.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, longs as numbers, defaults filled in).

import { loadAgentService } from '../load-proto';

export const MariaDbLogicalAgentService = loadAgentService('agent-mariadb-logical.proto', 'MariaDbLogicalAgent');

export interface LogicalDumpRequest {
  port: number;
  databases: string[];
  database_prefix: string;
  tables: string[];
  /** Name the tables only (first message), dump nothing; missing names are left out. */
  list_only?: boolean;
}

export interface LogicalDumpChunk {
  tables: string[];
  data: Buffer;
}

export interface LogicalLoadHeader {
  op_id: string;
  port: number;
}

export interface LogicalLoadChunk {
  header?: LogicalLoadHeader | null;
  data: Buffer;
}

export interface LogicalLoadReply {
  bytes: number;
  elapsed_ms: number;
}

// Loads proto/agent-postgres.proto at run time and states its message shapes as
// proto-loader decodes them (keepCase, int64 as number, defaults filled in).

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const protoPath = fileURLToPath(new URL('../../../../../proto/agent-postgres.proto', import.meta.url));

const definition = protoLoader.loadSync(protoPath, { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
const loaded = grpc.loadPackageDefinition(definition) as unknown as { kcm: { agent: { PostgresAgent: grpc.ServiceClientConstructor } } };

export const PostgresAgentService = loaded.kcm.agent.PostgresAgent;

export interface InstallPostgresRequest {
  op_id: string;
  comp_datadir: string;
  port: number;
  user: string;
  password: string;
  variables?: Record<string, string>;
}

export interface PostgresInstanceRequest {
  op_id: string;
  port: number;
}

export interface PostgresInstanceReply {
  port: number;
  datadir: string;
  pid: number;
  running: boolean;
  user: string;
  detail: string;
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

export type CatalogAction = 'imported' | 'dropped' | 'reimported' | 'skipped';

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

// Loads proto/agent.proto at run time (no generated code to go stale) and states the
// TypeScript shapes of its messages beside it, as proto-loader decodes them.

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const protoPath = fileURLToPath(new URL('../../../proto/agent.proto', import.meta.url));

const definition = protoLoader.loadSync(protoPath, {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
});

type ServiceClientCtor = grpc.ServiceClientConstructor;
const loaded = grpc.loadPackageDefinition(definition) as unknown as { kcm: { agent: { Agent: ServiceClientCtor } } };

export const AgentService = loaded.kcm.agent.Agent;

export interface HealthReply {
  hostaddr: string;
  version: string;
  uptime_ms: number;
  pid: number;
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

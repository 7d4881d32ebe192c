// Loads proto/agent-cgroup.proto at run time and states its message shapes as proto-loader
// decodes them (keepCase, longs and enums as numbers/strings, defaults filled in).

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const protoPath = fileURLToPath(new URL('../../../../../proto/agent-cgroup.proto', import.meta.url));

const definition = protoLoader.loadSync(protoPath, { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
const loaded = grpc.loadPackageDefinition(definition) as unknown as { kcm: { agent: { CgroupAgent: grpc.ServiceClientConstructor } } };

export const CgroupAgentService = loaded.kcm.agent.CgroupAgent;

export type InstanceKind = 'mysql' | 'pg';
export type CpuLimitMode = 'quota' | 'share';

export interface CgroupInfoReply {
  version: '' | 'v1' | 'v2';
  cpu_root: string;
  problem: string;
}

export interface SetCpuLimitRequest {
  op_id: string;
  port: number;
  kind: string;
  pid: number;
  cpu_cores: number;
  mode: string;
}

export interface RemoveCpuLimitRequest {
  op_id: string;
  port: number;
  kind: string;
}

export interface CpuLimitReply {
  version: 'v1' | 'v2';
  cgroup_path: string;
  written: { name: string; value: string }[];
  pids: number[];
}

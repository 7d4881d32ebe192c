// Loads proto/agent-cgroup.proto at run time and states its message shapes as proto-loader
// decodes them (keepCase, longs and enums as numbers/strings, defaults filled in).

import { loadAgentService } from '../load-proto';

export const CgroupAgentService = loadAgentService('agent-cgroup.proto', 'CgroupAgent');

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

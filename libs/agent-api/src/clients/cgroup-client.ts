// The manager's side of the CgroupAgent service.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { CgroupAgentService, type CgroupInfoReply, type CpuLimitMode, type CpuLimitReply, type InstanceKind } from '../contract/cgroup';

export interface SetCpuLimitParams {
  port: number;
  kind: InstanceKind;
  /** The instance's main process; omitted = the process listening on port. */
  pid?: number;
  cpuCores: number;
  mode: CpuLimitMode;
}

export class CgroupAgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 10_000) {
    this.client = agentClient(CgroupAgentService, address);
  }

  info(): Promise<CgroupInfoReply> {
    return callUnary(this.client, this.address, 'CgroupInfo', {}, this.deadlineMs);
  }

  setCpuLimit(opId: string, p: SetCpuLimitParams): Promise<CpuLimitReply> {
    const request = { op_id: opId, port: p.port, kind: p.kind, pid: p.pid ?? 0, cpu_cores: p.cpuCores, mode: p.mode };
    return callUnary(this.client, this.address, 'SetCpuLimit', request, this.deadlineMs);
  }

  removeCpuLimit(opId: string, port: number, kind: InstanceKind): Promise<CpuLimitReply> {
    return callUnary(this.client, this.address, 'RemoveCpuLimit', { op_id: opId, port, kind }, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}

// The CgroupAgent service: CPU isolation of the instances on this host.

import type * as grpc from '@grpc/grpc-js';
import { unary } from '../../grpc-unary';
import type { AgentContext, CapabilityModule } from '../../capability';
import { AgentFailure, CgroupAgentService, type CgroupInfoReply, type CpuLimitReply, type InstanceKind, type RemoveCpuLimitRequest, type SetCpuLimitRequest } from '@kcm/agent-api';
import { detectCpuHierarchy, type CpuHierarchy } from './detect';
import { applyCpuLimit, removeCpuLimit, validateCpuLimit } from './cpu-limit';
import { descendantsOf, listenerPid, parentMap } from './processes';
import { processAlive } from '../../ops/exec';

export interface CgroupModuleOptions {
  /** Where to find the cpu controller; default: detected from /proc/mounts. */
  hierarchy?: () => Promise<CpuHierarchy | undefined>;
}

function validateInstance(kind: string, port: number): InstanceKind {
  if (kind !== 'mysql' && kind !== 'pg') throw new AgentFailure('invalid_argument', `kind must be "mysql" or "pg", not ${JSON.stringify(kind)}`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new AgentFailure('invalid_argument', `port ${port} is not a TCP port`);
  return kind;
}

async function requireHierarchy(find: () => Promise<CpuHierarchy | undefined>): Promise<CpuHierarchy> {
  const h = await find();
  if (!h) throw new Error('no cgroup hierarchy with the cpu controller is mounted on this host');
  return h;
}

/** The instance's main process (given, or the listener on its port) and all its descendants. */
async function instanceProcesses(hostaddr: string, port: number, pid: number): Promise<number[]> {
  const main = pid > 0 ? pid : await listenerPid(port, hostaddr);
  if (main === undefined) throw new AgentFailure('failed_precondition', `no process listens on port ${port}; pass the instance's pid`);
  if (!processAlive(main)) throw new AgentFailure('failed_precondition', `process ${main} does not exist`);
  return descendantsOf(main, await parentMap());
}

export function cgroupModule(options: CgroupModuleOptions = {}): CapabilityModule {
  const find = options.hierarchy ?? detectCpuHierarchy;
  return {
    name: 'cgroup',
    register(server: grpc.Server, ctx: AgentContext) {
      server.addService(CgroupAgentService.service, {
        CgroupInfo: unary(ctx.logger, 'CgroupInfo', async (): Promise<CgroupInfoReply> => {
          const h = await find();
          return h ? { version: h.version, cpu_root: h.root, problem: '' } : { version: '', cpu_root: '', problem: 'no cpu controller mounted' };
        }),
        SetCpuLimit: unary(ctx.logger, 'SetCpuLimit', (req: SetCpuLimitRequest) =>
          ctx.ops.run(req.op_id, async (): Promise<CpuLimitReply> => {
            const kind = validateInstance(req.kind, req.port);
            const limit = validateCpuLimit(req.cpu_cores, req.mode);
            const h = await requireHierarchy(find);
            const applied = await applyCpuLimit(h, { kind, hostaddr: ctx.hostaddr, port: req.port }, limit, await instanceProcesses(ctx.hostaddr, req.port, req.pid));
            ctx.logger.info({ op_id: req.op_id, cgroup: applied.dir, limit, pids: applied.pids }, 'cpu limit applied');
            return { version: h.version, cgroup_path: applied.dir, written: applied.written, pids: applied.pids };
          }),
        ),
        RemoveCpuLimit: unary(ctx.logger, 'RemoveCpuLimit', (req: RemoveCpuLimitRequest) =>
          ctx.ops.run(req.op_id, async (): Promise<CpuLimitReply> => {
            const kind = validateInstance(req.kind, req.port);
            const h = await requireHierarchy(find);
            const removed = await removeCpuLimit(h, { kind, hostaddr: ctx.hostaddr, port: req.port });
            ctx.logger.info({ op_id: req.op_id, cgroup: removed.dir, pids: removed.pids }, 'cpu limit removed');
            return { version: h.version, cgroup_path: removed.dir, written: [], pids: removed.pids };
          }),
        ),
      });
    },
  };
}

/** The module the agent registers (capabilities/index.ts): the host's real hierarchy. */
export const cgroupCapability = cgroupModule();

// Job family: CPU isolation of one instance (update_instance_cgroup).
//
// The instance is named by ip and port and must be one kcm manages, of the type the
// request says (mysql = storage node, pg = compute node). Its agent moves the instance's
// processes (named by the pid the agent measures now) into the instance's cgroup and
// writes the quota or the share (spec 8: only CPU isolation is supported).
//
// Known limit: the new limit is not recorded in the metadata, so a later rebuild_node of
// that storage node applies the cluster's own cpu_cores and cpu_limit_node again.

import type { CpuLimitReply } from '@kcm/agent-api';
import { KcmError, type ParasOf, type UpdateInstanceCgroupResult } from '@kcm/protocol';
import { machineKey, type ClusterRecord, type MetaState } from '../meta/state';
import { changeableCluster, forEachInstance } from './cluster-lookup';
import { opId, setInstanceCpuLimit } from './instance-ops';
import type { JobOf } from './framework/workflow';

type CgroupParas = ParasOf<'update_instance_cgroup'>;
type InstanceType = CgroupParas['type'];

export interface ManagedInstance {
  cluster: ClusterRecord;
  type: InstanceType;
  instance: { id: string; hostaddr: string; port: number };
}

/** The storage node or compute node at hostaddr:port, in whichever cluster holds it. */
export function instanceAt(state: MetaState, hostaddr: string, port: number): ManagedInstance | undefined {
  for (const cluster of Object.values(state.clusters)) {
    for (const shard of Object.values(cluster.shards)) {
      const node = Object.values(shard.nodes).find((n) => n.hostaddr === hostaddr && n.port === port);
      if (node) return { cluster, type: 'mysql', instance: node };
    }
    const comp = Object.values(cluster.comps).find((c) => c.hostaddr === hostaddr && c.port === port);
    if (comp) return { cluster, type: 'pg', instance: comp };
  }
  return undefined;
}

const TYPE_NAMES: Record<InstanceType, string> = { mysql: 'a storage node (type mysql)', pg: 'a compute node (type pg)' };

function targetInstance(state: MetaState, p: CgroupParas): ManagedInstance {
  const where = `${p.ip}:${p.port}`;
  const found = instanceAt(state, p.ip, p.port);
  if (!found) throw KcmError.of('NOT_FOUND', `paras.ip/paras.port: ${where} is not an instance kcm manages`, { field: 'paras.port' });
  // Well-formed paras naming an instance that is not there as that type: no such instance.
  if (found.type !== p.type) throw KcmError.of('NOT_FOUND', `paras.type: ${where} is ${TYPE_NAMES[found.type]}, not ${p.type}`, { field: 'paras.type' });
  changeableCluster(state, found.cluster.id, 'paras.ip/paras.port');
  if (found.cluster.status === 'deleting') {
    throw KcmError.of('CONFLICT', `paras.ip/paras.port: ${where} belongs to cluster ${found.cluster.id}, which is being deleted`, { field: 'paras.port' });
  }
  const machine = state.machines[machineKey(p.ip, p.type === 'mysql' ? 'storage' : 'computer')];
  if (machine && p.cpu_cores > machine.totalCpuCores) {
    throw KcmError.of('NO_RESOURCES', `paras.cpu_cores: ${p.cpu_cores} is more than the ${machine.totalCpuCores} cores machine ${p.ip} was registered with (total_cpu_cores)`, {
      field: 'paras.cpu_cores',
    });
  }
  return found;
}

export const updateInstanceCgroup: JobOf<'update_instance_cgroup', { 'apply cpu limit': UpdateInstanceCgroupResult }> = {
  jobType: 'update_instance_cgroup',
  validate: (p, state) => void targetInstance(state, p),
  // Called right after validate on the same state: the instance's cluster orders this job
  // with the others that may remove or rebuild the instance.
  lockKey: (p, state) => {
    const found = instanceAt(state, p.ip, p.port);
    return found ? `cluster:${found.cluster.id}` : null;
  },
  steps: (p) => [
    {
      name: 'apply cpu limit',
      async run(ctx) {
        const { type, instance } = targetInstance(ctx.state(), p);
        let reply: CpuLimitReply | undefined;
        await forEachInstance([instance], (i) => `${type} ${i.hostaddr}:${i.port}`, async (i) => {
          reply = await setInstanceCpuLimit(ctx.agents, opId(ctx.jobId, 'cgroup', `${type}-${i.id}`), i, type, { cpuCores: p.cpu_cores, mode: p.cgroup_mode });
        });
        return {
          ip: p.ip,
          port: String(p.port),
          type,
          cpu_cores: String(p.cpu_cores),
          cgroup_mode: p.cgroup_mode,
          cgroup_path: reply!.cgroup_path,
          pids: reply!.pids.join(','),
        };
      },
    },
  ],
  result: (outputs) => outputs['apply cpu limit'],
};

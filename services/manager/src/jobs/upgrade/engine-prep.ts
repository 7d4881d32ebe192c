// What upgrade_cluster needs before it touches an instance, and what it records after.
//
// Every manager and every agent of the cluster's hosts must speak kcm protocol 2 (the build
// with engine caches, UpgradeEngine and the hold at compute nodes: an older agent would not
// know the calls, an older manager could not apply the version records). Then every host of
// the cluster fetches the target engine into its agent's cache (PrepareEngine): a version the
// host's package sources lack stops the job before any instance is stopped, naming the host.

import type { ParasOf } from '@kcm/protocol';
import { KcmError } from '@kcm/protocol';
import type { Agents } from '@kcm/agent-api';
import type { ClusterRecord } from '../../meta/state';
import type { StepContext } from '../framework/workflow';
import { requireGroupProtocol } from '../../group/protocol-gate';
import { measureComputerVersion, measureStorageVersion, prepareEngineOnHosts } from '../engine-versions';

type UpgradeParas = ParasOf<'upgrade_cluster'>;

const storageHosts = (cluster: ClusterRecord) => [...new Set(Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes).map((n) => n.hostaddr)))];
const computeHosts = (cluster: ClusterRecord) => [...new Set(Object.values(cluster.comps).map((c) => c.hostaddr))];

/** Refuses unless the group and the cluster's agents can upgrade; fetches the engines; returns `<kind> <version> on <host>` for each host. */
export async function checkAndPrepare(ctx: StepContext<UpgradeParas, any>, cluster: ClusterRecord, p: UpgradeParas): Promise<string[]> {
  const storage = storageHosts(cluster);
  const compute = computeHosts(cluster);
  await requireGroupProtocol(ctx, 2, 'upgrade_cluster', { agentHosts: [...storage, ...compute] });
  const prepared: string[] = [];
  if (p.storage_version !== undefined) {
    await prepareEngineOnHosts(ctx, ctx.jobId, 'mariadb', p.storage_version, storage);
    prepared.push(...storage.map((h) => `mariadb ${p.storage_version} on ${h}`));
  }
  if (p.computer_version !== undefined) {
    await prepareEngineOnHosts(ctx, ctx.jobId, 'postgres', p.computer_version, compute);
    prepared.push(...compute.map((h) => `postgres ${p.computer_version} on ${h}`));
  }
  return prepared;
}

/** The version a storage node's running server answers; throws when it does not answer one. */
export async function storageVersion(agents: Agents, node: { hostaddr: string; port: number }): Promise<string> {
  const version = await measureStorageVersion(agents, node);
  if (!version) throw KcmError.of('INSTANCE_FAILED', `${node.hostaddr}:${node.port} answered no MariaDB version`);
  return version;
}

/** The version a compute node's running server answers; throws when it does not answer one. */
export async function computerVersion(agents: Agents, comp: { hostaddr: string; port: number }): Promise<string> {
  const version = await measureComputerVersion(agents, comp);
  if (!version) throw KcmError.of('INSTANCE_FAILED', `${comp.hostaddr}:${comp.port} does not accept queries now`);
  return version;
}

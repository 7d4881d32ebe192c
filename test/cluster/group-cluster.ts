// A cluster on a 3-manager group of processes, for the real-engine tests that SIGKILL the
// manager leader (or an engine) while the cluster works: three manager processes and three
// agent processes (test/manager/helpers/group.ts), every host a storage and a computer
// machine (machines.ts), one cluster of 2 shards x 3 MariaDB nodes. Each caller brings an
// address block and port ranges no other test uses. Jobs and queries go to whichever
// members are alive, so a killed leader does not stop the caller.

import { randomUUID } from 'node:crypto';
import { chmodSync } from 'node:fs';
import mysql from 'mysql2/promise';
import type { ReplyEnvelope } from '@kcm/protocol';
import { emit, EmitError, submitJob, waitForJobEnd } from '../helpers/emit-client';
import { LocalGroup, type GroupOptions } from '../manager/helpers/group';
import { sleep } from '../manager/helpers/processes';
import { enginePidsUnder, killAll, removeCgroupsOf } from './cluster-fixture';
import { clusterParas, type CreateClusterParas } from './cluster-paras';
import { hostDirs, registerMachines, type MachineDirs, type PortRange } from './machines';

export interface GroupClusterOptions {
  /** Used in the temp folder's name and the jobs' request ids. */
  name: string;
  members: string[];
  /** The agents' hosts (127.0.2.x); the cluster's nodes are spread over them. */
  hosts: string[];
  agentPort: number;
  storagePorts: (i: number) => PortRange;
  computerPorts: (i: number) => PortRange;
  managerConfig?: GroupOptions['managerConfig'];
  /** create_cluster paras over the defaults (2 shards x 3 nodes, 1 compute node on the last host). */
  cluster?: Partial<CreateClusterParas>;
}

/** get_cluster_detail's attachment, the parts these tests read. */
export interface ClusterDetail {
  list_shard: {
    shard_id: string;
    shard_name: string;
    list_node: { hostaddr: string; port: string; status: string; master: string; replica_of: string; replication_error: string; fenced: string }[];
  }[];
  list_comp: { hostaddr: string; port: string }[];
}

export type Endpoint = { host: string; port: number };

export interface GroupCluster {
  group: LocalGroup;
  clusterId: string;
  computer: { user: string; password: string };
  storage: { user: string; password: string };
  /** The members whose process runs. */
  live(): string[];
  /** Host i's machine directories (datadir, comp_datadir, ...). */
  dirs(i: number): MachineDirs;
  /** Submits a job to any live member (one request id across retries) and waits for its end. */
  runJob(jobType: string, paras: Record<string, unknown>, timeoutMs?: number): Promise<ReplyEnvelope>;
  /** A sync query, to the live members in turn until one answers (a member just restarted may know no leader yet). */
  query(jobType: string, paras: Record<string, unknown>): Promise<ReplyEnvelope>;
  detail(): Promise<ClusterDetail>;
  /** The node get_cluster_detail measures as shard i's master. */
  masterOf(shardIndex: number): Promise<Endpoint>;
  /** Runs one statement on shard i's master as the storage account. */
  onShard<T>(shardIndex: number, sql: string): Promise<T[]>;
  /** Runs one statement on a MariaDB node as the storage account. */
  onNode<T>(at: Endpoint, sql: string): Promise<T[]>;
  close(): Promise<void>;
}

export async function startGroupCluster(opts: GroupClusterOptions): Promise<GroupCluster> {
  const group = new LocalGroup({ name: opts.name, members: opts.members, agentHosts: opts.hosts, agentPort: opts.agentPort, managerConfig: opts.managerConfig });
  chmodSync(group.dir, 0o755); // mysql and postgres traverse it to their directories
  const live = () => group.liveMembers();
  const dirs = (i: number) => hostDirs(group.dir, i);
  const runJob = async (jobType: string, paras: Record<string, unknown>, timeoutMs = 120_000) => {
    const ack = await submitJob(live, jobType, paras, { requestId: `${opts.name}-${randomUUID()}` });
    return waitForJobEnd(live, ack.jobId, timeoutMs);
  };
  const query = async (jobType: string, paras: Record<string, unknown>) => {
    const deadline = Date.now() + 30_000;
    for (let attempt = 0; ; attempt++) {
      const members = live();
      try {
        return await emit(members[attempt % members.length], jobType, paras);
      } catch (err) {
        if (!(err instanceof EmitError) || !err.retryable || Date.now() > deadline) throw err;
        await sleep(200);
      }
    }
  };
  const close = async () => {
    const engines = await enginePidsUnder(group.dir);
    await group.stop();
    killAll(engines);
    await removeCgroupsOf(opts.hosts);
  };
  try {
    await group.start();
    await group.waitForLeader();
    await registerMachines({ runJob, dirs }, { hosts: opts.hosts, storagePorts: opts.storagePorts, computerPorts: opts.computerPorts });
    const created = await runJob('create_cluster', clusterParas({ nick_name: 'grp', shards: '2', ...opts.cluster }, opts.hosts), 400_000);
    if (created.status !== 'done') throw new Error(`create_cluster: ${created.error_info}`);
    const att = created.attachment as { cluster_id: string; computer_user: string; computer_pwd: string; storage_user: string; storage_pwd: string };
    const storage = { user: att.storage_user, password: att.storage_pwd };
    const detail = async () => (await query('get_cluster_detail', { cluster_id: att.cluster_id })).attachment as unknown as ClusterDetail;
    const masterOf = async (shardIndex: number) => {
      const m = (await detail()).list_shard[shardIndex].list_node.find((n) => n.master === 'true');
      if (!m) throw new Error(`shard ${shardIndex + 1} has no master just now`);
      return { host: m.hostaddr, port: Number(m.port) };
    };
    const onNode = async <T>(at: Endpoint, sql: string): Promise<T[]> => {
      const c = await mysql.createConnection({ ...at, ...storage, connectTimeout: 5000 });
      try {
        return (await c.query(sql))[0] as T[];
      } finally {
        await c.end();
      }
    };
    const onShard = async <T>(shardIndex: number, sql: string): Promise<T[]> => onNode<T>(await masterOf(shardIndex), sql);
    return {
      group, clusterId: att.cluster_id, computer: { user: att.computer_user, password: att.computer_pwd }, storage,
      live, dirs, runJob, query, detail, masterOf, onShard, onNode, close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

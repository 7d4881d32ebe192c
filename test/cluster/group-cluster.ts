// A cluster on a 3-manager group of processes (group-fixture.ts), for the real-engine tests
// that SIGKILL the manager leader (or an engine) while the cluster works: every host a
// storage and a computer machine, one cluster of 2 shards x 3 MariaDB nodes. Jobs and
// queries go to whichever members are alive, so a killed leader does not stop the caller.

import mysql from 'mysql2/promise';
import { clusterParas, type CreateClusterParas } from './cluster-paras';
import { startGroupFixture, type GroupFixture, type GroupFixtureOptions } from './group-fixture';
import type { PortRange } from './machines';

export interface GroupClusterOptions extends Omit<GroupFixtureOptions, 'machines'> {
  storagePorts: (i: number) => PortRange;
  computerPorts: (i: number) => PortRange;
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

export interface GroupCluster extends GroupFixture {
  clusterId: string;
  computer: { user: string; password: string };
  storage: { user: string; password: string };
  detail(): Promise<ClusterDetail>;
  /** The node get_cluster_detail measures as shard i's master. */
  masterOf(shardIndex: number): Promise<Endpoint>;
  /** Runs one statement on shard i's master as the storage account. */
  onShard<T>(shardIndex: number, sql: string): Promise<T[]>;
  /** Runs one statement on a MariaDB node as the storage account. */
  onNode<T>(at: Endpoint, sql: string): Promise<T[]>;
}

export async function startGroupCluster(opts: GroupClusterOptions): Promise<GroupCluster> {
  const { storagePorts, computerPorts, cluster, ...group } = opts;
  const g = await startGroupFixture({ ...group, machines: { storagePorts, computerPorts } });
  try {
    const created = await g.runDone('create_cluster', clusterParas({ nick_name: 'grp', shards: '2', ...cluster }, opts.hosts), 400_000);
    const att = created.attachment as { cluster_id: string; computer_user: string; computer_pwd: string; storage_user: string; storage_pwd: string };
    const storage = { user: att.storage_user, password: att.storage_pwd };
    const detail = async () => (await g.query('get_cluster_detail', { cluster_id: att.cluster_id })).attachment as unknown as ClusterDetail;
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
    return { ...g, clusterId: att.cluster_id, computer: { user: att.computer_user, password: att.computer_pwd }, storage, detail, masterOf, onShard, onNode };
  } catch (err) {
    await g.close();
    throw err;
  }
}

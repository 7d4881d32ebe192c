// expand_cluster in a 3-manager group on real engines, the leader SIGKILLed during the copy
// and again during the catch-up: three manager processes (127.0.1.97-99), three agent
// processes (127.0.2.97-99), a cluster of 2 shards x 3 MariaDB nodes and 1 compute node, an
// insert/update/delete load through the compute node. The move finishes; the copy resumed
// at the chunk (its rows copied once in all); every acknowledged write is on shard 2.

import { randomUUID } from 'node:crypto';
import { chmodSync } from 'node:fs';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobProgressAttachment } from '@kcm/protocol';
import { emit, jobStatus, submitJob, waitForJobEnd } from '../../manager/helpers/emit-client';
import { LocalGroup } from '../../manager/helpers/group';
import { sleep } from '../../manager/helpers/processes';
import { enginePidsUnder, killAll, removeCgroupsOf } from '../cluster-fixture';
import { hostDirs, registerMachines } from '../machines';
import { MoveLoad, rowDifferences, type Row } from '../move-load';

const MEMBERS = ['127.0.1.97:18600', '127.0.1.98:18600', '127.0.1.99:18600'];
const HOSTS = ['127.0.2.97', '127.0.2.98', '127.0.2.99'];
const AGENT_PORT = 18690;
const storagePorts = (i: number) => `${53100 + 20 * i}-${53119 + 20 * i}`;
const computerPorts = (i: number) => `${53200 + 10 * i}-${53209 + 10 * i}`;
const SEEDED = 60_000;
const DB = 'postgres_$$_public';

describe('expand_cluster with the manager leader SIGKILLed during the copy and the catch-up', () => {
  let group: LocalGroup;
  let clusterId = '';
  let att: { cluster_id: string; computer_user: string; computer_pwd: string; storage_user: string; storage_pwd: string };
  const live = () => group.liveMembers();
  const runJob = async (jobType: string, paras: Record<string, unknown>, timeoutMs = 120_000) => {
    const ack = await submitJob(live, jobType, paras, { requestId: `move-kill-${randomUUID()}` });
    return waitForJobEnd(live, ack.jobId, timeoutMs);
  };
  const detail = async () =>
    (await emit(live()[0], 'get_cluster_detail', { cluster_id: clusterId })).attachment as { list_shard: { shard_name: string; list_node: { hostaddr: string; port: string; master: string }[] }[]; list_comp: { hostaddr: string; port: string }[] };
  const masterOf = async (shardIndex: number) => {
    const m = (await detail()).list_shard[shardIndex].list_node.find((n) => n.master === 'true')!;
    return { host: m.hostaddr, port: Number(m.port) };
  };
  const onShard = async <T>(shardIndex: number, sql: string): Promise<T[]> => {
    const c = await mysql.createConnection({ ...(await masterOf(shardIndex)), user: att.storage_user, password: att.storage_pwd });
    try {
      return (await c.query(sql))[0] as T[];
    } finally {
      await c.end();
    }
  };

  beforeAll(async () => {
    group = new LocalGroup({ name: 'move-kill', members: MEMBERS, agentHosts: HOSTS, agentPort: AGENT_PORT, managerConfig: { tickMs: 50, moveCopyRowsPerSecond: 10_000, moveChunkRows: 1_000 } as never });
    chmodSync(group.dir, 0o755);
    await group.start();
    await group.waitForLeader();
    await registerMachines({ runJob, dirs: (i) => hostDirs(group.dir, i) }, { hosts: HOSTS, storagePorts, computerPorts });
    const created = await runJob('create_cluster', {
      nick_name: 'mvk', ha_mode: 'rbr', shards: '2', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100', cpu_cores: '1',
      cpu_limit_node: 'share', innodb_size: '64', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1',
      storage_iplists: HOSTS, computer_iplists: [HOSTS[2]], install_proxysql: '0',
    }, 400_000);
    expect(created.status, created.error_info).toBe('done');
    att = created.attachment as typeof att;
    clusterId = att.cluster_id;
    await onShard(0, `CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await onShard(0, `CREATE TABLE \`${DB}\`.mv_kill (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB`);
    await onShard(0, `INSERT INTO \`${DB}\`.mv_kill SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${SEEDED}`);
    await sleep(3000); // catalog sync makes the foreign table
  }, 600_000);

  afterAll(async () => {
    const engines = group ? await enginePidsUnder(group.dir) : [];
    await group?.stop();
    killAll(engines);
    await removeCgroupsOf(HOSTS);
  }, 60_000);

  it('finishes with every acknowledged write on shard 2', async () => {
    const d = await detail();
    const comp = d.list_comp[0];
    const shardIds = d.list_shard.map((s) => s.shard_name.replace(/^shard_/, ''));
    const load = new MoveLoad({ host: comp.hostaddr, port: Number(comp.port), user: att.computer_user, password: att.computer_pwd, database: 'postgres' }, 'public.mv_kill', SEEDED);
    load.start();
    await sleep(500);
    const ack = await submitJob(live, 'expand_cluster', { cluster_id: clusterId, src_shard_id: shardIds[0], dst_shard_id: shardIds[1], table_list: ['postgres.public.mv_kill'], drop_old_table: '0' }, { requestId: `move-kill-${randomUUID()}` });
    const kills: string[] = [];
    for (const phase of ['copy rows', 'catch up from the binlog']) {
      let leader = await group.waitForLeader(undefined, 30_000);
      for (;;) {
        const st = await jobStatus(leader, ack.jobId).catch(() => null);
        const progress = (st?.attachment as JobProgressAttachment | null)?.progress;
        if (st?.status === 'done' || st?.status === 'failed') break;
        if (progress?.step_name === phase && (phase !== 'copy rows' || (progress.done ?? 0) > 0)) {
          await group.manager(leader).kill();
          kills.push(`${phase} (${progress.done ?? 0} rows)`);
          break;
        }
        await sleep(20);
        leader = live().includes(leader) ? leader : await group.waitForLeader(undefined, 30_000);
      }
      await group.waitForLeader(undefined, 30_000);
      // Bring the killed member back so the group keeps a quorum for the next kill.
      for (const m of MEMBERS) if (!live().includes(m)) await group.startManager(m);
    }
    const end = await waitForJobEnd(live, ack.jobId, 300_000);
    await sleep(500);
    await load.stop();
    console.log(`kills: ${kills.join(', ')}; writes ${load.writes} (failed ${load.failures}); result ${JSON.stringify(end.attachment)}`);
    expect(end.status, end.error_info).toBe('done');
    expect(kills[0]).toMatch(/^copy rows/);
    // The new leader's copy resumed after the chunks the killed one had copied: fewer rows than the table's.
    const table = (end.attachment as { list_table: { rows_copied: string }[] }).list_table[0];
    expect(Number(table.rows_copied)).toBeLessThan(SEEDED);
    const moved = new Map((await onShard<{ id: number; v: number; note: string }>(1, `SELECT id, v, note FROM \`${DB}\`.mv_kill`)).map((r) => [r.id, { v: r.v, note: r.note } as Row]));
    expect(rowDifferences(load, moved)).toEqual([]);
  }, 600_000);
});

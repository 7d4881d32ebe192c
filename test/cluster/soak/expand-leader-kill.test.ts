// expand_cluster in a 3-manager group on real engines, the leader SIGKILLed during the copy
// and again during the catch-up (the members' step logs must show each kill cut its step): three manager processes (127.0.1.97-99), three agent
// processes (127.0.2.97-99), a cluster of 2 shards x 3 MariaDB nodes and 1 compute node, an
// insert/update/delete load through the compute node. The move finishes; the copy resumed
// at the chunk (its rows copied once in all); every acknowledged write is on shard 2.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobProgressAttachment } from '@kcm/protocol';
import { jobStatus } from '../../helpers/emit-client';
import { stepCutByKill, stepEvents } from '../../manager/helpers/logs';
import { sleep } from '../../manager/helpers/processes';
import { startGroupCluster, type GroupCluster } from '../group-cluster';
import { MoveLoad, rowDifferences, type Row } from '../move-load';

const MEMBERS = ['127.0.1.97:18600', '127.0.1.98:18600', '127.0.1.99:18600'];
const HOSTS = ['127.0.2.97', '127.0.2.98', '127.0.2.99'];
const AGENT_PORT = 18690;
const storagePorts = (i: number) => `${53100 + 20 * i}-${53119 + 20 * i}`;
const computerPorts = (i: number) => `${53200 + 10 * i}-${53209 + 10 * i}`;
const SEEDED = 60_000;
const DB = 'postgres_$$_public';

describe('expand_cluster with the manager leader SIGKILLed during the copy and the catch-up', () => {
  let g: GroupCluster;

  beforeAll(async () => {
    g = await startGroupCluster({
      name: 'move-kill', members: MEMBERS, hosts: HOSTS, agentPort: AGENT_PORT, storagePorts, computerPorts,
      managerConfig: { tickMs: 50, moveCopyRowsPerSecond: 10_000, moveChunkRows: 1_000 } as never, cluster: { nick_name: 'mvk' },
    });
    await g.onShard(0, `CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await g.onShard(0, `CREATE TABLE \`${DB}\`.mv_kill (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB`);
    await g.onShard(0, `INSERT INTO \`${DB}\`.mv_kill SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${SEEDED}`);
    await sleep(3000); // catalog sync makes the foreign table
  }, 600_000);

  afterAll(async () => {
    await g?.close();
  }, 60_000);

  it('finishes with every acknowledged write on shard 2', async () => {
    const group = g.group;
    const d = await g.detail();
    const comp = d.list_comp[0];
    const shardIds = d.list_shard.map((s) => s.shard_name.replace(/^shard_/, ''));
    const load = new MoveLoad({ host: comp.hostaddr, port: Number(comp.port), ...g.computer, database: 'postgres' }, 'public.mv_kill', SEEDED);
    load.start();
    await sleep(500);
    const jobId = await g.submit('expand_cluster', { cluster_id: g.clusterId, src_shard_id: shardIds[0], dst_shard_id: shardIds[1], table_list: ['postgres.public.mv_kill'], drop_old_table: '0' });
    const kills: { phase: string; member: string; jobId: string; at: number; rows: number }[] = [];
    for (const phase of ['copy rows', 'catch up from the binlog']) {
      let leader = await group.waitForLeader(undefined, 30_000);
      for (;;) {
        const st = await jobStatus(leader, jobId).catch(() => null);
        const progress = (st?.attachment as JobProgressAttachment | null)?.progress;
        if (st?.status === 'done' || st?.status === 'failed') break;
        if (progress?.step_name === phase && (phase !== 'copy rows' || (progress.done ?? 0) > 0)) {
          kills.push({ phase, member: leader, jobId, at: Date.now(), rows: progress.done ?? 0 });
          await group.manager(leader).kill();
          break;
        }
        await sleep(20);
        leader = g.live().includes(leader) ? leader : await group.waitForLeader(undefined, 30_000);
      }
      await group.waitForLeader(undefined, 30_000);
      // Bring the killed member back so the group keeps a quorum for the next kill.
      for (const m of MEMBERS) if (!g.live().includes(m)) await group.startManager(m);
    }
    const end = await g.waitForEnd(jobId, 300_000);
    await sleep(500);
    await load.stop();
    // Each kill cut the step it is named for: the killed leader was running it, and the next leader ran it again.
    const events = stepEvents(MEMBERS.map((m) => ({ member: m, lines: group.manager(m).logLines() })));
    const cut = kills.map((k) => stepCutByKill(events, k));
    console.log(`kills: ${kills.map((k, i) => `${k.member} seen in "${k.phase}" (${k.rows} rows), cut "${cut[i] ?? 'no step'}"`).join('; ')}; writes ${load.writes} (failed ${load.failures}); result ${JSON.stringify(end.attachment)}`);
    expect(end.status, end.error_info).toBe('done');
    expect(cut).toEqual(['copy rows', 'catch up from the binlog']);
    // The new leader's copy resumed after the chunks the killed one had copied: fewer rows than the table's.
    const table = (end.attachment as { list_table: { rows_copied: string }[] }).list_table[0];
    expect(Number(table.rows_copied)).toBeLessThan(SEEDED);
    const moved = new Map((await g.onShard<{ id: number; v: number; note: string }>(1, `SELECT id, v, note FROM \`${DB}\`.mv_kill`)).map((r) => [r.id, { v: r.v, note: r.note } as Row]));
    expect(rowDifferences(load, moved)).toEqual([]);
  }, 600_000);
});

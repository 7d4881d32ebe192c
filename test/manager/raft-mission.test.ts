// raft_mission end to end with real processes (managers 127.0.1.34-36, agent 127.0.2.32):
// a one-member group grows to three by add_peer, hands leadership to a named member by
// transfer_leader, and removes its leader by remove_peer, while a client keeps submitting
// jobs and every submission is accepted (short NO_LEADER gaps are retried).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplyEnvelope } from '@kcm/protocol';
import { emit, findLeader, metrics, submitJob, waitForJobEnd } from '../helpers/emit-client';
import { LocalGroup, createMachineParas } from './helpers/group';
import { waitFor } from './helpers/processes';
import { ContinuousWriter } from './helpers/writer';

const [M1, M2, M3] = ['127.0.1.34:18310', '127.0.1.35:18310', '127.0.1.36:18310'];
const AGENT_HOST = '127.0.2.32';
const RAFT_GAUGES = ['kcm_raft_term', 'kcm_raft_is_leader', 'kcm_raft_commit_index', 'kcm_raft_applied_index'];

interface MetaMode {
  mode: string;
  /** The leader this member knows. */
  leader: string | null;
  members: string[];
  learners: string[];
}

async function metaMode(member: string): Promise<MetaMode> {
  const attachment = (await emit(member, 'get_meta_mode')).attachment as unknown as MetaMode;
  return { ...attachment, members: [...attachment.members].sort() };
}

describe('raft_mission on a real manager group', () => {
  let group: LocalGroup;
  /** The members a client may send to, as the test changes the group. */
  let members: string[] = [M1];
  let writer: ContinuousWriter | undefined;
  let mission = 0;

  const runMission = async (paras: Record<string, string>): Promise<ReplyEnvelope> => {
    const { jobId } = await submitJob(() => members, 'raft_mission', paras, { requestId: `mission-${process.pid}-${++mission}` });
    return waitForJobEnd(() => members, jobId, 60_000);
  };

  beforeAll(async () => {
    group = new LocalGroup({ name: 'raft-mission', members: [M1, M2, M3], joiners: [M2, M3], agentHosts: [AGENT_HOST], agentPort: 18391 });
    await group.start([M1]);
  }, 90_000);

  afterAll(async () => {
    await writer?.stop();
    await group?.stop();
  }, 30_000);

  it('grows from one member to three, transfers leadership, removes the leader, and stays writable throughout', async () => {
    // One member: it elects itself and reports no replication.
    expect(await group.waitForLeader([M1])).toBe(M1);
    expect(await metaMode(M1)).toMatchObject({ mode: 'no_rep', leader: M1, members: [M1], learners: [] });

    // A registered machine to send set_machine jobs about, continuously, from here on.
    const { jobId: registration } = await submitJob([M1], 'create_machine', createMachineParas(AGENT_HOST, group.dir), { requestId: `raft-mission-machine-${process.pid}` });
    expect((await waitForJobEnd([M1], registration)).status).toBe('done');
    writer = new ContinuousWriter('raft-mission', () => members, () => ({ jobType: 'set_machine', paras: { hostaddr: AGENT_HOST, node_stats: 'running' } })).start();

    // Two joiners start empty (join: true) and are added one at a time.
    await Promise.all([group.startManager(M2), group.startManager(M3)]);
    for (const peer of [M2, M3]) {
      const added = await runMission({ task_type: 'add_peer', peer });
      expect(added.status, added.error_info).toBe('done');
      expect(added.attachment).toEqual({ learner: peer, voter: peer });
      members = [...members, peer];
    }
    for (const m of members) expect(await metaMode(m)).toMatchObject({ mode: 'mgr', leader: M1, members: [M1, M2, M3].sort(), learners: [] });
    // The promoted learners hold the whole log: their applied index reaches the leader's commit.
    const leaderCommit = (await metrics(M1)).get('kcm_raft_commit_index')!;
    for (const m of [M2, M3]) {
      await waitFor(`${m} to apply up to ${leaderCommit}`, async () => (await metrics(m)).get('kcm_raft_applied_index')! >= leaderCommit, 10_000);
    }

    // transfer_leader to a named member: done only once that member leads.
    expect(await findLeader(members)).toBe(M1);
    const transferred = await runMission({ task_type: 'transfer_leader', target_leader: M3 });
    expect(transferred.status, transferred.error_info).toBe('done');
    expect(transferred.attachment).toEqual({ leader: M3 });
    for (const m of members) {
      expect((await metrics(m)).get('kcm_raft_is_leader'), m).toBe(m === M3 ? 1 : 0);
      expect((await metaMode(m)).leader, m).toBe(M3);
    }
    const finishedBy = (jobId: string) => members.filter((m) => group.manager(m).logLines().some((l) => l.msg === 'job finished' && l.jobId === jobId));
    expect(finishedBy(transferred.job_id)).toEqual([M3]); // the old leader could not finish it

    // remove_peer of the leader: it steps down, the other two carry on. Clients are pointed at
    // the two that stay first, as an operator does: a request sent to the leader while it removes
    // itself can wait the forward deadline (15 s) before it answers outcome-unknown (a CI run saw
    // it; noted in the closing note of issue 31's stop as left open).
    members = [M1, M2];
    const removed = await runMission({ task_type: 'remove_peer', peer: M3 });
    expect(removed.status, removed.error_info).toBe('done');
    const newLeader = await group.waitForLeader(members);
    expect([M1, M2]).toContain(newLeader);
    for (const m of members) expect(await metaMode(m)).toMatchObject({ mode: 'mgr', leader: newLeader, members: [M1, M2], learners: [] });
    expect((await metrics(M3)).get('kcm_raft_is_leader')).toBe(0);

    // The writer was accepted every time, and each of its jobs ran.
    const report = await writer.stop();
    writer = undefined;
    const slowest = Math.max(...report.accepted.map((s) => s.latencyMs));
    console.log(`continuous writer: ${report.accepted.length} set_machine jobs accepted, ${report.retries} retries, slowest acknowledgement ${slowest} ms`);
    expect(report.rejected).toEqual([]);
    expect(report.accepted.length).toBeGreaterThan(10);
    expect(slowest).toBeLessThan(6_000); // an election or transfer gap, not a request left hanging
    const last = report.accepted[report.accepted.length - 1];
    expect((await waitForJobEnd(members, last.jobId, 30_000)).status).toBe('done');

    // Every member, the removed one included, exports the Raft gauges.
    for (const m of [M1, M2, M3]) {
      const values = await metrics(m);
      for (const gauge of RAFT_GAUGES) expect(values.has(gauge), `${m} /metrics lacks ${gauge}`).toBe(true);
      expect(values.get('kcm_raft_term')!).toBeGreaterThan(0);
    }
  }, 170_000);
});

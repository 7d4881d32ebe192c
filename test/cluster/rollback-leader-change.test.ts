// A recorded rollback survives a leader change (issue 12, defect 2): a 3-manager group and
// three agents, each its own OS process, on real engines. Host 3's agent is SIGKILLed
// during create_cluster's compute-node install (frozen as it starts, then killed); the job fails leaving a recorded rollback;
// then the leader is SIGKILLed too. Once host 3's agent is back, the new leader finishes
// the rollback: the cluster is gone and nothing of it is left on the hosts.

import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emit, jobStatus } from '../helpers/emit-client';
import { sleep, waitFor } from '../manager/helpers/processes';
import { enginePidsUnder, HOSTS } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { startGroupFixture, type GroupFixture } from './group-fixture';

const MEMBERS = ['127.0.1.74:58178', '127.0.1.75:58178', '127.0.1.76:58178'];
const AGENT_PORT = 58156;
const KILLED = HOSTS[2];

describe('a recorded rollback is finished by the next leader', () => {
  let g: GroupFixture;
  let leader: string;

  beforeAll(async () => {
    g = await startGroupFixture({ name: 'rollback-leader', members: MEMBERS, hosts: HOSTS, agentPort: AGENT_PORT, managerConfig: { tickMs: 50, electionTick: 10 } });
    leader = await g.group.waitForLeader();
  }, 180_000);

  afterAll(async () => {
    await g?.close();
  }, 60_000);

  it('SIGKILL the agent mid-install, then the leader: the new leader removes what was left once the agent is back', async () => {
    const jobId = await g.submit('create_cluster', clusterParas({ nick_name: 'orphans', cpu_limit_node: 'quota', computer_iplists: [KILLED] }), [leader]);
    // The compute node's install is under way once its step runs and its directory exists
    // on host 3; the agent is frozen there, so the kill cannot land after a quick install.
    const compDir = g.dirs(2).comp_datadir;
    await waitFor('install compute nodes', async () => {
      const status = await jobStatus(leader, jobId);
      if (status.status === 'failed' || status.status === 'done') throw new Error(`create_cluster ended before installing compute nodes: ${status.status} ${status.error_info}`);
      const step = (status.attachment as { progress?: { step_name?: string } } | null)?.progress?.step_name;
      return step === 'install compute nodes' && (await readdir(compDir).catch(() => [])).length > 0;
    }, 120_000, 20);
    await g.group.agent(KILLED).signal('SIGSTOP');
    await sleep(1000);
    await g.group.agent(KILLED).kill();
    const reply = await g.waitForEnd(jobId, 120_000);
    expect(reply.error_info).toMatch(/rollback incomplete: agent 127\.0\.2\.3 unreachable; .* will be removed when it answers$/);
    expect((await emit(leader, 'get_cluster_summary')).attachment).toMatchObject({ list_cluster: [expect.anything()] });

    await g.group.manager(leader).kill();
    const next = await g.group.waitForLeader(MEMBERS.filter((m) => m !== leader), 30_000);
    g.group.agent(KILLED).start();
    await waitFor('the new leader to finish the rollback', async () => {
      const summary = await emit(next, 'get_cluster_summary');
      return (summary.attachment as { list_cluster: unknown[] }).list_cluster.length === 0;
    }, 90_000, 500);
    expect(await enginePidsUnder(g.group.dir)).toEqual([]);
    for (const i of [0, 1, 2]) for (const dir of Object.values(g.dirs(i))) expect(await readdir(dir).catch(() => []), dir).toEqual([]);
  }, 300_000);
});

// kcm restarts itself without a client noticing (issue 31, docs/upgrade.md): a group of 3
// managers and 3 agents, each its own process, with a real cluster (1 shard x 3 MariaDB
// nodes, 1 PostgreSQL compute node). Under a steady client load (cluster and job queries in a
// loop; jobs with request_ids), each agent is restarted in turn, then each manager, the
// leader last after transfer_leader, while a long job (add_comps) runs across the leader's
// restart. A client that retries on another member with the same request_id sees no failed
// request, every job ends done, and no database server was restarted: every mariadbd and
// postgres pid is the same before and after, while every kcm process's pid changed.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_VERSION } from '@kcm/common';
import { waitForJobEnd } from '../helpers/emit-client';
import { waitFor } from '../manager/helpers/processes';
import { startGroupCluster, type GroupCluster } from '../cluster/group-cluster';
import { databaseServerPids, everyNodeOnline, metaMode, restartAgent, rollManagers } from './rolling';
import { SteadyLoad } from './steady-load';

const MEMBERS = ['127.0.1.141:58441', '127.0.1.142:58441', '127.0.1.143:58441'];
const HOSTS = ['127.0.2.141', '127.0.2.142', '127.0.2.143'];
const AGENT_PORT = 58440;

describe('a rolling restart of every agent and every manager under load', () => {
  let c: GroupCluster;

  beforeAll(async () => {
    c = await startGroupCluster({
      name: 'rolling-restart',
      members: MEMBERS,
      hosts: HOSTS,
      agentPort: AGENT_PORT,
      managerConfig: { tickMs: 50, electionTick: 10 },
      storagePorts: (i) => ({ low: 56400 + 20 * i, high: 56419 + 20 * i }),
      computerPorts: (i) => ({ low: 56500 + 10 * i, high: 56509 + 10 * i }),
      cluster: { nick_name: 'rolling', shards: '1' },
    });
  }, 500_000);

  afterAll(async () => {
    await c?.close();
  }, 60_000);

  /** Every storage and compute node measured online. */
  const allOnline = () => everyNodeOnline(c, 3);

  it('no client request fails, every job is done, no database server restarts, every kcm process did', async () => {
    const servers = databaseServerPids(c.group.dir);
    expect([...servers.values()].filter((cmd) => /mariadbd/.test(cmd))).toHaveLength(3);
    expect(servers.size).toBe(4); // and the compute node's postmaster
    await waitFor('every node online', allOnline, 60_000, 500);

    const load = new SteadyLoad(MEMBERS, [
      { jobType: 'get_cluster_detail', paras: { cluster_id: c.clusterId } },
      { jobType: 'get_meta_mode', paras: {} },
      { jobType: 'get_machine_summary', paras: {} },
    ]).start();
    const kcmPids: { what: string; before: number; after: number }[] = [];

    // Agents, one at a time; a short job under each restart; the next only once every node is measured online again.
    for (const host of HOSTS) {
      await load.submit(`noswitch under ${host}'s restart`, 'set_noswitch', { type: '1', timeout: '30', cluster_id: c.clusterId });
      kcmPids.push({ what: `agent ${host}`, ...(await restartAgent(c.group, host)) });
      await waitFor(`every node online after ${host}'s agent restart`, allOnline, 60_000, 500);
    }

    // Managers, one at a time, the leader last after transfer_leader; add_comps is submitted
    // just before the leader's turn, so it runs on the old leader and resumes on the new one.
    let addComps: string | undefined;
    let membersBack = 0;
    const rolled = await rollManagers(c, undefined, async () => {
      if (++membersBack === 2) addComps = await load.submit('add_comps across the leader restart', 'add_comps', { cluster_id: c.clusterId, comps: '1', computer_iplists: [HOSTS[0]] });
    });
    for (const [member, pids] of rolled) kcmPids.push({ what: `manager ${member}`, ...pids });

    const report = await load.stop();
    console.log(`rolling restart under load: ${report.answered} requests answered, ${report.retries} attempts sent again, ${report.failed.length} failed; jobs: ${report.jobs.map((j) => `${j.what} #${j.jobId}`).join(', ')}`);
    expect(report.failed).toEqual([]);
    expect(report.answered).toBeGreaterThan(20);

    // Every job ended done, add_comps included.
    expect(addComps).toBeDefined();
    for (const job of report.jobs) {
      const end = await waitForJobEnd(MEMBERS, job.jobId, 240_000);
      expect({ job: job.what, status: end.status, error: end.error_info }).toEqual({ job: job.what, status: 'done', error: end.error_info });
    }
    // add_comps really ran across the leader's restart: it started steps on the old leader and
    // finished on another member.
    const oldLeader = [...rolled.keys()].at(-1)!;
    const linesOf = (member: string) => c.group.manager(member).logLines().filter((l) => l.jobId === addComps);
    expect(linesOf(oldLeader).some((l) => l.msg === 'step started'), `add_comps #${addComps} started on the old leader ${oldLeader}`).toBe(true);
    expect(linesOf(oldLeader).some((l) => l.msg === 'job finished'), `add_comps #${addComps} did not finish on the old leader`).toBe(false);
    expect(MEMBERS.filter((m) => m !== oldLeader).some((m) => linesOf(m).some((l) => l.msg === 'job finished')), `add_comps #${addComps} finished on a new leader`).toBe(true);

    // And the compute node it added is removed again, by a job after the restarts.
    const d = await c.detail();
    const added = (d.list_comp as { comp_id?: string; hostaddr: string }[]).find((x) => x.hostaddr === HOSTS[0]);
    expect(added?.comp_id).toBeDefined();
    expect((await c.runJob('delete_comp', { cluster_id: c.clusterId, comp_id: added!.comp_id }, 120_000)).status).toBe('done');

    // Every kcm process restarted (its pid changed); no database server did.
    expect(kcmPids).toHaveLength(6);
    for (const p of kcmPids) expect(p.after, `${p.what} was restarted`).not.toBe(p.before);
    const after = databaseServerPids(c.group.dir);
    for (const [pid, cmd] of servers) expect(after.get(pid), `database server ${pid} (${cmd.slice(0, 60)}...) still the same process`).toBe(cmd);
    await waitFor('every node online at the end', allOnline, 60_000, 500);

    // get_meta_mode shows every member on this build.
    const view = (await metaMode(await c.group.waitForLeader())).attachment!;
    expect(view.list_member.map((m) => [m.member, m.protocol, m.kcm_version]).sort()).toEqual(MEMBERS.map((m) => [m, String(KCM_PROTOCOL), KCM_VERSION]));
  }, 900_000);
});

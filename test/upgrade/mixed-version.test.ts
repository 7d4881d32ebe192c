// One version of skew, both ways (issue 31, docs/upgrade.md): this build (kcm protocol 2) and
// the previous one (commit 18f544a, which states no protocol: 1) work together, each process
// started from its own checkout (previous-build.ts). On one group of 3 managers and 3 agents:
//  1. the previous build's managers with this build's agents: create_cluster works end to end;
//  2. the managers upgraded one at a time (the leader last, after transfer_leader): with 2 of
//     this build and 1 of the previous, a job works and get_meta_mode shows each member's
//     protocol and release; then all of this build;
//  3. this build's managers with the previous build's agents: create_cluster works again.
// And a peer stating a protocol this build does not talk to (3) is refused, by an agent and by
// a manager, with FAILED_PRECONDITION naming both versions, logged once per peer.

import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KCM_VERSION } from '@kcm/common';
import { AgentService, channelCredentials } from '@kcm/agent-api';
import { memberServiceDefinition } from '../../services/manager/src/group/member-describe';
import { waitFor } from '../manager/helpers/processes';
import { startGroupCluster, type GroupCluster } from '../cluster/group-cluster';
import { clusterParas } from '../cluster/cluster-paras';
import { previousBuild, type PreviousBuild } from './previous-build';
import { databaseServerPids, everyNodeOnline, metaMode, restartAgent, rollManagers, THIS_BUILD } from './rolling';

const MEMBERS = ['127.0.1.151:58451', '127.0.1.152:58451', '127.0.1.153:58451'];
const HOSTS = ['127.0.2.151', '127.0.2.152', '127.0.2.153'];
const AGENT_PORT = 58450;

/** One call stating kcm protocol `protocol`, as a build of it would; the call's error. */
function callStating(ctor: grpc.ServiceClientConstructor, address: string, method: string, protocol: string): Promise<grpc.ServiceError | null> {
  const client = new ctor(address, channelCredentials()) as unknown as Record<string, Function> & grpc.Client;
  const md = new grpc.Metadata();
  md.set('kcm-protocol', protocol);
  return new Promise((resolve) => {
    client[method]({}, md, { deadline: Date.now() + 5_000 }, (err: grpc.ServiceError | null) => {
      client.close();
      resolve(err);
    });
  });
}
const MemberService = grpc.makeGenericClientConstructor(memberServiceDefinition, 'Member');

describe('this build and the previous one, mixed', () => {
  let previous: PreviousBuild;
  let c: GroupCluster;
  let servers: Map<number, string>;

  beforeAll(async () => {
    previous = previousBuild(); // throws, saying why, when it cannot be made: never a silent skip
    c = await startGroupCluster({
      name: 'mixed-version',
      members: MEMBERS,
      hosts: HOSTS,
      agentPort: AGENT_PORT,
      managerConfig: { tickMs: 50, electionTick: 10 },
      storagePorts: (i) => ({ low: 56600 + 20 * i, high: 56619 + 20 * i }),
      computerPorts: (i) => ({ low: 56700 + 10 * i, high: 56709 + 10 * i }),
      cluster: { nick_name: 'mixed1', shards: '1' },
      // 1. The previous build's managers, this build's agents.
      beforeStart: (group) => {
        for (const m of group.managers.values()) m.root = previous.root;
      },
    });
    servers = databaseServerPids(c.group.dir);
  }, 500_000);

  afterAll(async () => {
    await c?.close();
  }, 60_000);

  const allOnline = () => everyNodeOnline(c, 3);

  it("1. the previous build's managers ran create_cluster on this build's agents", async () => {
    console.log(`previous build ${previous.commit.slice(0, 7)} at ${previous.root} (packages ${previous.packages})`);
    // The managers are the previous build's: they have no Member service and state no protocol.
    const described = await callStating(MemberService, '127.0.1.151:58452', 'Describe', '2');
    expect(described?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(servers.size).toBe(4); // 3 mariadbd, 1 postgres
    await waitFor('every node online', allOnline, 60_000, 500);
  });

  it('an agent of this build refuses a manager stating kcm protocol 3, naming both versions; logged once', async () => {
    const agentAddress = `${HOSTS[0]}:${AGENT_PORT}`;
    for (let i = 0; i < 2; i++) {
      const err = await callStating(AgentService, agentAddress, 'Health', '3');
      expect(err?.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(err?.details).toMatch(new RegExp(`^manager 127\\.0\\.0\\.1 speaks kcm protocol 3; this agent ${agentAddress.replaceAll('.', '\\.')} \\(kcm ${KCM_VERSION.replaceAll('.', '\\.')}\\) accepts kcm protocol 1-2: upgrade this agent first`));
    }
    expect((await callStating(AgentService, agentAddress, 'Health', 'x'))?.code).toBe(grpc.status.FAILED_PRECONDITION);
    // Lines are written in order: once the line of 'x' is there, a second line for 3 would be before it.
    const refusals = () => c.group.agent(HOSTS[0]).logLines().filter((l) => typeof l.msg === 'string' && l.msg.startsWith('refused a kcm protocol'));
    await waitFor("the agent's line about 'x'", () => refusals().some((l) => l.peer_protocol === 'x'), 10_000, 100);
    expect(refusals().map((l) => l.peer_protocol)).toEqual(['3', 'x']);
    expect(refusals()[0].msg).toMatch(/manager 127\.0\.0\.1 speaks kcm protocol 3; .*upgrade this agent first/);
  });

  it('2. the managers upgraded one at a time, the leader last: with 2 new and 1 old a job works and get_meta_mode shows each build', async () => {
    let back = 0;
    await rollManagers(c, THIS_BUILD, async (member) => {
      back++;
      if (back !== 2) return;
      // Two members of this build, the leader still of the previous one.
      const leader = await c.group.waitForLeader();
      expect(leader).not.toBe(member);
      await waitFor('the new members to learn every build', async () => {
        const view = (await metaMode(member)).attachment;
        const byMember = new Map(view?.list_member.map((m) => [m.member, `${m.protocol}/${m.kcm_version}`]));
        return MEMBERS.every((m) => byMember.get(m) === (m === leader ? '1/' : `2/${KCM_VERSION}`));
      }, 30_000, 300);
      const added = await c.runJob('add_comps', { cluster_id: c.clusterId, comps: '1', computer_iplists: [HOSTS[0]] }, 180_000);
      expect({ status: added.status, error: added.error_info }).toEqual({ status: 'done', error: added.error_info });
    });
    // All of this build: get_meta_mode says so, of the members and of the agents.
    const leader = await c.group.waitForLeader();
    await waitFor('every member and agent on protocol 2', async () => {
      const view = (await metaMode(leader)).attachment as unknown as { list_member: { protocol: string; kcm_version: string }[]; list_agent: { protocol: string }[] };
      return view.list_member.every((m) => m.protocol === '2' && m.kcm_version === KCM_VERSION) && view.list_agent.length === 3 && view.list_agent.every((a) => a.protocol === '2');
    }, 30_000, 300);
    const comp = (await c.detail()).list_comp.find((x) => x.hostaddr === HOSTS[0]) as { comp_id: string } | undefined;
    expect((await c.runJob('delete_comp', { cluster_id: c.clusterId, comp_id: comp!.comp_id }, 120_000)).status).toBe('done');
  }, 600_000);

  it('a manager of this build refuses a peer stating kcm protocol 3, naming both versions', async () => {
    const err = await callStating(MemberService, '127.0.1.151:58452', 'Describe', '3');
    expect(err?.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err?.details).toMatch(/^manager 127\.0\.0\.1 speaks kcm protocol 3; this manager 127\.0\.1\.151:58451 \(kcm [0-9.]+\) accepts kcm protocol 1-2: upgrade this manager first/);
    expect((await callStating(MemberService, '127.0.1.151:58452', 'Describe', '2'))).toBeNull();
  });

  it("3. this build's managers ran create_cluster on the previous build's agents; no database server restarted throughout", async () => {
    for (const host of HOSTS) await restartAgent(c.group, host, previous.root);
    const leader = await c.group.waitForLeader();
    await waitFor("the leader to see every agent's protocol 1", async () => {
      const view = (await metaMode(leader)).attachment as unknown as { list_agent: { protocol: string; kcm_version: string }[] };
      return view.list_agent.length === 3 && view.list_agent.every((a) => a.protocol === '1' && a.kcm_version === '');
    }, 30_000, 300);
    const created = await c.runJob('create_cluster', clusterParas({ nick_name: 'mixed2', shards: '1' }, HOSTS), 300_000);
    expect({ status: created.status, error: created.error_info }).toEqual({ status: 'done', error: created.error_info });
    // The first cluster's servers are the same processes after 6 agent and 3 manager restarts.
    const after = databaseServerPids(c.group.dir);
    for (const [pid, cmd] of servers) expect(after.get(pid), `database server ${pid} still the same process`).toBe(cmd);
    await waitFor('every node online', allOnline, 60_000, 500);
  }, 400_000);
});

// kcm display <topology>: the deployment as it is now, measured: each manager asked
// get_meta_mode over HTTPS (reachable, its role, its release), each agent's port tried, the
// machines registered and the instances on each host as the managers measure them
// (get_machine_summary, get_cluster_detail). Nothing here is a stored word.

import { acceptsConnections } from '../local/launcher';
import { askMetaMode } from '../local/meta-probe';
import { createEmitClient } from '../http-client';
import { localEnvelope } from '../local/local-jobs';
import { managerMember, managerUrl } from './host-plan';
import type { TopologyFile } from './topology-file';

export interface ManagerState {
  member: string;
  url: string;
  reachable: boolean;
  /** leader / follower / learner as the group reports it; '' when not a member or not known. */
  role: string;
  version: string;
  problem?: string;
}

export interface AgentState {
  host: string;
  reachable: boolean;
  /** Machine types registered for the host, with the managers' online/offline. */
  registered: string[];
  status: string;
  instances: number;
  instancesOnline: number;
}

export interface DisplayState {
  leader?: string;
  managers: ManagerState[];
  agents: AgentState[];
  problem?: string;
}

interface MemberRow { member: string; role: string; kcm_version: string }
interface MachineRow { hostaddr: string; status: string; machine_types?: string[] }
interface NodeRow { hostaddr: string; status: string }

export async function measureDeployment(topology: TopologyFile, access: { token?: string; ca?: Buffer }): Promise<DisplayState> {
  const urls = topology.managers.map((m) => managerUrl(m, topology.global.plain_http));
  const answers = await Promise.all(urls.map((url) => askMetaMode(url, { token: access.token, ca: access.ca })));
  const client = createEmitClient({ url: urls.join(','), token: access.token, ca: access.ca, timeoutMs: 10_000 });
  let members: MemberRow[] = [];
  let leader: string | undefined;
  const state: DisplayState = { managers: [], agents: [] };
  try {
    const meta = (await client.emit(localEnvelope('get_meta_mode', {}))).reply;
    const attachment = (meta.attachment ?? {}) as { leader?: string; list_member?: MemberRow[] };
    members = attachment.list_member ?? [];
    leader = attachment.leader || undefined;
  } catch (err) {
    state.problem = (err as Error).message;
  }
  state.leader = leader;
  state.managers = topology.managers.map((m, i) => {
    const member = managerMember(m);
    const row = members.find((r) => r.member === member);
    const answer = answers[i];
    return { member, url: urls[i], reachable: answer.state !== 'unreachable', role: row?.role ?? '', version: row?.kcm_version ?? '', ...(answer.problem ? { problem: answer.problem } : {}) };
  });
  let machines: MachineRow[] = [];
  const nodes: NodeRow[] = [];
  if (state.problem === undefined) {
    const summary = (await client.emit(localEnvelope('get_machine_summary', {}))).reply;
    machines = ((summary.attachment ?? {}) as { list_machine?: MachineRow[] }).list_machine ?? [];
    const clusters = (await client.emit(localEnvelope('get_cluster_summary', {}))).reply;
    for (const c of ((clusters.attachment ?? {}) as { list_cluster?: { cluster_name: string }[] }).list_cluster ?? []) {
      const detail = (await client.emit(localEnvelope('get_cluster_detail', { cluster_name: c.cluster_name }))).reply;
      const a = (detail.attachment ?? {}) as { list_comp?: NodeRow[]; list_shard?: { list_node?: NodeRow[] }[] };
      nodes.push(...(a.list_comp ?? []), ...(a.list_shard ?? []).flatMap((s) => s.list_node ?? []));
    }
  }
  state.agents = await Promise.all(
    topology.agents.map(async (a) => {
      const machine = machines.find((m) => m.hostaddr === a.host);
      const here = nodes.filter((n) => n.hostaddr === a.host);
      return {
        host: a.host,
        reachable: await acceptsConnections(a.host, topology.global.agent_port),
        registered: machine?.machine_types ?? [],
        status: machine?.status ?? 'not registered',
        instances: here.length,
        instancesOnline: here.filter((n) => n.status === 'online').length,
      };
    }),
  );
  return state;
}

export function displayLines(topology: TopologyFile, state: DisplayState): string[] {
  const lines = [`Deployment ${topology.name}: leader ${state.leader ?? 'none known'}${state.problem ? ` (${state.problem})` : ''}`, 'Managers:'];
  for (const m of state.managers) {
    // The release comes from the answering member's Describe rounds: a member that just joined is not described yet.
    const release = m.version ? `kcm ${m.version}` : m.role ? 'release not reported yet' : '';
    lines.push(`  ${m.member.padEnd(22)} ${m.reachable ? 'reachable  ' : 'UNREACHABLE'} ${(m.role || 'not a member').padEnd(12)} ${release}${m.problem && m.reachable ? `  (${m.problem})` : ''}`);
  }
  lines.push('Agents:');
  for (const a of state.agents) {
    const registered = a.registered.length > 0 ? `${a.registered.join('+')} ${a.status}` : 'not registered';
    lines.push(`  ${a.host.padEnd(22)} ${a.reachable ? 'reachable  ' : 'UNREACHABLE'} ${registered.padEnd(26)} instances ${a.instancesOnline}/${a.instances} online`);
  }
  return lines;
}

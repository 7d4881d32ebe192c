// kcm member replace <old> <new> --topology file: a dead manager out, a new one in, without
// a moment where the group needs more members than it has: remove_peer first (a 3-member
// group with one dead keeps its quorum of 2 and, with 2 members, needs both), then the new
// host installed with `join: true` (it starts empty and waits), then add_peer (it joins as
// a learner, catches up, and is promoted by the job). Each step is skipped when the group
// shows it done, so a run cut short is finished by running it again.

import type { ReplyEnvelope } from '@kcm/protocol';
import { contextFilePath, saveContext } from '../context-file';
import { createEmitClient, TransportError, type EmitClient } from '../http-client';
import { waitForLeader } from '../local/meta-probe';
import { localEnvelope, waitForLocalJob } from '../local/local-jobs';
import { contextName, installHosts } from './deploy';
import { loadDeployment, managerUrls } from './deployment';
import { managerMember } from './host-plan';

export interface MemberReplace {
  topologyFile: string;
  oldMember: string;
  newHost: string;
  timeoutMs: number;
  say: (line: string) => void;
}

/**
 * The group's members once it has a leader. The dead member may have been the leader: the
 * others need an election timeout or two first, and asking before that is NO_LEADER.
 */
async function members(urls: readonly string[], access: { token: string; ca: Buffer }, deadline: number): Promise<string[] | string> {
  const waited = await waitForLeader({ urls, timeoutMs: Math.max(1_000, deadline - Date.now()), token: access.token, ca: access.ca });
  if (!waited.ok) return `no leader among ${urls.join(', ')}: ${waited.reason}`;
  return waited.answer.members ?? [];
}

async function mission(client: EmitClient, paras: Record<string, string>, deadline: number): Promise<ReplyEnvelope> {
  const ack = (await client.emit(localEnvelope('raft_mission', paras, { request_id: `kcm-member-replace-${paras.task_type}-${paras.peer}` }))).reply;
  if (ack.error_code !== '0') return ack;
  return waitForLocalJob(client, ack, deadline);
}

/** Undefined when done; else what stopped it (one line: a refusal, a timeout, an unreachable group). */
export async function replaceMember(r: MemberReplace): Promise<string | undefined> {
  try {
    return await replace(r);
  } catch (err) {
    if (err instanceof TransportError) return err.message;
    throw err;
  }
}

async function replace(r: MemberReplace): Promise<string | undefined> {
  const deployment = await loadDeployment(r.topologyFile);
  const { managers } = deployment.topology;
  const index = managers.findIndex((m) => m.host === r.newHost || managerMember(m) === r.newHost);
  if (index < 0) return `the topology has no manager entry for ${r.newHost}: put it in place of ${r.oldMember}'s entry, with join: true`;
  const entry = managers[index];
  if (!entry.join) return `managers[${index}].join must be true: the new member starts empty and is added to the running group`;
  const stillListed = managers.findIndex((m) => managerMember(m) === r.oldMember);
  if (stillListed >= 0) return `${r.oldMember} is still managers[${stillListed}] in the topology: replace that entry by ${r.newHost}'s`;
  const newMember = managerMember(entry);
  const deadline = Date.now() + r.timeoutMs;
  const remaining = managerUrls(deployment).filter((_, i) => i !== index);
  const access = { token: deployment.token, ca: deployment.caPem };
  const client = createEmitClient({ url: remaining.join(','), ...access, timeoutMs: 20_000 });

  const before = await members(remaining, access, deadline);
  if (typeof before === 'string') return before;
  if (before.includes(r.oldMember)) {
    const removed = await mission(client, { task_type: 'remove_peer', peer: r.oldMember }, deadline);
    if (removed.status !== 'done') return `remove_peer ${r.oldMember}: ${removed.error_info || removed.status}`;
    r.say(`removed ${r.oldMember} from the group`);
  } else {
    r.say(`${r.oldMember} is not a member (already removed)`);
  }
  await installHosts(deployment, deployment.plans.filter((p) => p.host === entry.host), r.say);
  const after = await members(remaining, access, deadline);
  if (typeof after === 'string') return after;
  if (!after.includes(newMember)) {
    const added = await mission(client, { task_type: 'add_peer', peer: newMember }, deadline);
    if (added.status !== 'done') return `add_peer ${newMember}: ${added.error_info || added.status}`;
    r.say(`added ${newMember} to the group`);
  } else {
    r.say(`${newMember} is already a member`);
  }
  const file = contextFilePath();
  saveContext({ name: contextName(deployment), endpoints: managerUrls(deployment), caFile: deployment.files.caPem, tokenFile: deployment.files.adminToken, makeCurrent: true }, file);
  r.say(`CLI context "${contextName(deployment)}" now lists ${managerUrls(deployment).join(', ')}`);
  return undefined;
}

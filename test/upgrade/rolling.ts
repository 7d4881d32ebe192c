// What the upgrade tests do to a running group (test/cluster/group-fixture.ts), the way
// docs/upgrade.md tells an operator to: restart one agent at a time and wait until it serves
// again; restart one manager at a time and wait until it is back in the group; the leader
// last, after raft_mission transfer_leader. Each restart may switch the process to another
// build (ManagedProcess.root). And the evidence: the database servers' pids, read from /proc.

import { readdirSync, readFileSync } from 'node:fs';
import { emitRaw, findLeader } from '../helpers/emit-client';
import type { GroupFixture } from '../cluster/group-fixture';
import type { GroupCluster } from '../cluster/group-cluster';
import { STARTUP_TIMEOUT_MS, type LocalGroup } from '../manager/helpers/group';
import { REPO_ROOT, waitFor } from '../manager/helpers/processes';

/** The mariadbd and postgres servers (not postgres's backends) whose command line names a folder under `dir`, by pid. */
export function databaseServerPids(dir: string): Map<number, string> {
  const found = new Map<number, string>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (comm !== 'mariadbd' && comm !== 'postgres') continue;
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmdline.includes(dir)) found.set(Number(name), cmdline.trim());
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/**
 * Restarts the agent of `host` (SIGTERM, as systemd stops it; then start), from `root` when
 * given, and waits until the new process listens. Returns the old and new pids.
 */
export async function restartAgent(group: LocalGroup, host: string, root?: string): Promise<{ before: number; after: number }> {
  const agent = group.agent(host);
  const before = agent.pid!;
  await agent.signal('SIGTERM');
  if (root) agent.root = root;
  agent.start();
  const after = agent.pid!;
  await waitFor(`agent ${host} (pid ${after}) to listen`, () => agent.logLines().some((l) => l.msg === 'agent listening' && l.pid === after), STARTUP_TIMEOUT_MS, 200);
  return { before, after };
}

interface MetaMode {
  leader: string | null;
  commit: string;
  list_member: { member: string; role: string; match: string; replication: string; protocol?: string; kcm_version?: string }[];
}

/** get_meta_mode from `member` (any reply: also NO_LEADER). */
export async function metaMode(member: string): Promise<{ error_code: string; attachment: MetaMode | null }> {
  const reply = await emitRaw(member, 'get_meta_mode', {}, { timeoutMs: 3_000 });
  return { error_code: reply.error_code, attachment: reply.attachment as unknown as MetaMode | null };
}

/** Waits until `member` knows the leader and the leader replicates to it up to its own commit (it is back in the group). */
export async function waitInGroup(members: readonly string[], member: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `${member} back in the group (known leader, replicated up to the leader's commit)`,
    async () => {
      const own = await metaMode(member);
      if (own.error_code !== '0' || !own.attachment?.leader) return false;
      const leader = await findLeader(members);
      if (!leader) return false;
      const view = (await metaMode(leader)).attachment;
      const entry = view?.list_member.find((m) => m.member === member);
      return leader === member || (entry?.replication === 'replicate' && Number(entry.match) >= Number(view!.commit) - 5);
    },
    timeoutMs,
    250,
  );
}

/**
 * Restarts manager `member` (SIGTERM, then start on the same data), from `root` when given,
 * and waits until it is back in the group. Returns the old and new pids.
 */
export async function restartManager(group: LocalGroup, member: string, root?: string): Promise<{ before: number; after: number }> {
  const m = group.manager(member);
  const before = m.pid!;
  await m.signal('SIGTERM');
  if (root) m.root = root;
  await group.startManager(member);
  await waitInGroup(group.opts.members, member);
  return { before, after: m.pid! };
}

/** Moves leadership to `target` by raft_mission transfer_leader and waits until it leads. */
export async function transferLeader(g: GroupFixture, target: string): Promise<void> {
  const reply = await g.runJob('raft_mission', { task_type: 'transfer_leader', target_leader: target }, 60_000);
  if (reply.status !== 'done') throw new Error(`transfer_leader to ${target}: ${reply.error_info}`);
  await waitFor(`${target} to lead`, async () => (await findLeader(g.group.opts.members)) === target, 30_000, 200);
}

/**
 * The rolling restart of the manager group as docs/upgrade.md lays it out: each follower in
 * turn, then leadership moved to a restarted member and the old leader restarted last.
 * `onEach` runs after every member is back (a job that must still work, a check of versions).
 */
export async function rollManagers(g: GroupFixture, root: string | undefined, onEach: (member: string) => Promise<void> = async () => {}): Promise<Map<string, { before: number; after: number }>> {
  const members = g.group.opts.members;
  const leader = await g.group.waitForLeader();
  const pids = new Map<string, { before: number; after: number }>();
  for (const member of members.filter((m) => m !== leader)) {
    pids.set(member, await restartManager(g.group, member, root));
    await onEach(member);
  }
  await transferLeader(g, members.find((m) => m !== leader)!);
  pids.set(leader, await restartManager(g.group, leader, root));
  await onEach(leader);
  return pids;
}

/** This checkout: ManagedProcess.root for this build's processes. */
export const THIS_BUILD = REPO_ROOT;

/** get_cluster_detail measures every storage node (at least `nodes`) and every compute node online. */
export async function everyNodeOnline(c: GroupCluster, nodes: number): Promise<boolean> {
  const d = await c.detail();
  const storage = d.list_shard.flatMap((s) => s.list_node.map((n) => n.status));
  const compute = (d.list_comp as unknown as { status: string }[]).map((x) => x.status);
  return storage.length >= nodes && compute.length > 0 && [...storage, ...compute].every((s) => s === 'online');
}

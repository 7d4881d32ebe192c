// Three real manager processes (127.0.1.31-33) and one agent (127.0.2.31). The leader is
// SIGKILLed while create_machine is inside its second step; a new leader must resume the
// job at that step, never re-run the committed first step, and finish it `done`, while
// get_status keeps answering from every live member apart from the election gap.
//
// How the second step is held in flight without test hooks in production code: the
// agent's 'prepare directories' proves each folder writable by writing
// `<dir>/.kcm-write-probe-<agent pid>`. The test puts a named pipe (FIFO) at that path
// first, so the agent's write blocks in open() until someone reads the pipe: a real I/O
// stall, like a hung mount. 'contact agent' (statfs only) is not affected. After the kill
// the test reads the pipe, the stale write completes and the agent removes the pipe, so the
// new leader's re-run of the step finds an ordinary folder and succeeds.

import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AvailabilityProbe } from './helpers/availability';
import { emit, jobStatus, submitJob, waitForJobEnd } from '../helpers/emit-client';
import { LocalGroup, createMachineParas } from './helpers/group';
import { countSteps, stepEvents } from './helpers/logs';
import { sleep, waitFor } from './helpers/processes';

const MEMBERS = ['127.0.1.31:18300', '127.0.1.32:18300', '127.0.1.33:18300'];
const AGENT_HOST = '127.0.2.31';
const AGENT_PORT = 18390;
/** The bound on a member's silence (election gap included). */
const MAX_SILENCE_MS = 5_000;

/** Reads a FIFO once (releasing a writer blocked in open()), without blocking the event loop. */
async function drainFifo(file: string): Promise<string> {
  const handle = await open(file, 'r');
  try {
    return (await handle.readFile()).toString();
  } finally {
    await handle.close();
  }
}

describe('a manager group when its leader is SIGKILLed during a multi-step job', () => {
  let group: LocalGroup;

  beforeAll(async () => {
    group = new LocalGroup({ name: 'leader-kill', members: MEMBERS, agentHosts: [AGENT_HOST], agentPort: AGENT_PORT });
    await group.start();
    await group.waitForLeader();
  }, 90_000);

  afterAll(async () => {
    await group?.stop();
  }, 30_000);

  it('resumes the job at its first unfinished step on the new leader, runs no committed step twice, and keeps get_status answering', async () => {
    const paras = createMachineParas(AGENT_HOST, group.dir);
    const agentPid = await group.agent(AGENT_HOST).listeningPid();
    mkdirSync(paras.datadir, { recursive: true });
    const trap = path.join(paras.datadir, `.kcm-write-probe-${agentPid}`);
    execFileSync('mkfifo', [trap]);

    const oldLeader = await group.waitForLeader();
    const followers = MEMBERS.filter((m) => m !== oldLeader);
    // Submitted through a follower: the write is forwarded to the leader.
    const { jobId } = await submitJob([followers[0]], 'create_machine', paras, { requestId: `leader-kill-${Date.now()}` });

    const probe = new AvailabilityProbe((m) => jobStatus(m, jobId, 3_000), 200);
    for (const m of MEMBERS) probe.watch(m);

    // The leader committed step 1 and is blocked inside step 2 (the pipe is still there).
    const leaderLog = () => stepEvents([{ member: oldLeader, lines: group.manager(oldLeader).logLines() }]).filter((e) => e.jobId === jobId);
    await waitFor('the leader to start "prepare directories"', () => leaderLog().some((e) => e.step === 'prepare directories' && e.kind === 'started'), 20_000, 50);
    const beforeKill = await jobStatus(followers[1], jobId);
    expect(beforeKill.status).toBe('ongoing');
    expect(beforeKill.attachment).toEqual({ progress: { step: 2, steps: 3, step_name: 'prepare directories' } });
    expect(lstatSync(trap).isFIFO()).toBe(true);
    await sleep(1_500); // the step stays stalled (the agent's deadline is 5 s); every member keeps answering

    probe.unwatch(oldLeader);
    await group.manager(oldLeader).kill();
    const killedAt = Date.now();
    expect(await drainFifo(trap)).toBe('ok'); // the dead leader's write, still pending in the agent
    await waitFor('the agent to remove the released pipe', () => !existsSync(trap), 10_000, 50);

    const newLeader = await group.waitForLeader(followers);
    expect(newLeader).not.toBe(oldLeader);
    const final = await waitForJobEnd(followers, jobId, 30_000);
    expect(final.status, final.error_info).toBe('done');
    await sleep(2_000); // and goes on answering under the new leader
    const availability = await probe.stop();
    console.log(`leader ${oldLeader} killed; ${newLeader} resumed job ${jobId} at step 2 and finished it ${Date.now() - killedAt} ms later`);
    for (const a of availability) console.log(`  get_status from ${a.member}: ${a.successes} answers, ${a.failures} failures, longest silence ${a.longestGapMs} ms`);

    // Step accounting from every member's log: 'step done' is written after the commit.
    const events = stepEvents(MEMBERS.map((member) => ({ member, lines: group.manager(member).logLines() }))).filter((e) => e.jobId === jobId);
    const counts = countSteps(events);
    expect(counts.get(`${jobId}/contact agent`)).toEqual({ started: 1, done: 1, startedAfterDone: 0, startedBy: [oldLeader] });
    expect(counts.get(`${jobId}/prepare directories`)).toEqual({ started: 2, done: 1, startedAfterDone: 0, startedBy: [oldLeader, newLeader] });
    expect(counts.get(`${jobId}/record machine`)).toEqual({ started: 1, done: 1, startedAfterDone: 0, startedBy: [newLeader] });
    const resumedAt = events.find((e) => e.member === newLeader)!.at;
    expect(resumedAt).toBeGreaterThanOrEqual(killedAt); // the new leader ran nothing before the old one died

    // Every live member answered get_status throughout, silent at most through the election.
    for (const a of availability) {
      expect(a.successes, `${a.member} answered only ${a.successes} times`).toBeGreaterThanOrEqual(a.member === oldLeader ? 3 : 8);
      expect(a.longestGapMs, `${a.member} was silent ${a.longestGapMs} ms; failures: ${a.failureSamples.join(' | ')}`).toBeLessThan(MAX_SILENCE_MS);
    }

    // The machine is registered exactly once, seen alike by both live members.
    for (const m of followers) {
      const summary = await emit(m, 'get_machine_summary');
      expect(summary.attachment).toEqual({ list_machine: [{ hostaddr: AGENT_HOST, status: 'online', node_stats: 'running', agent: 'reachable', machine_types: ['storage'] }] });
    }

    // The killed member comes back on its own data as a follower, learns the outcome, and runs nothing.
    await group.startManager(oldLeader);
    const caughtUp = await waitFor('the restarted member to report the job done', async () => {
      const r = await jobStatus(oldLeader, jobId, 3_000);
      return r.status === 'done' ? r : undefined;
    }, 30_000, 250);
    expect(caughtUp.error_code).toBe('0');
    const afterRestart = stepEvents([{ member: oldLeader, lines: group.manager(oldLeader).logLines() }]).filter((e) => e.at > killedAt);
    expect(afterRestart).toEqual([]);
  }, 150_000);
});

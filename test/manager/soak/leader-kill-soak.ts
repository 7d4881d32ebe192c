// npm run soak:manager -- [--kills 20] [--keep]
//
// Three manager processes (127.0.1.41-43) and three agents (127.0.2.33-35). While clients
// submit jobs continuously (see workload.ts), the leader is SIGKILLed at a random moment,
// a new leader must take over, and the killed member is restarted on its data; N times.
// Then every acknowledged job must end done or failed (with a reason), none stuck; job ids
// are unique and consecutive (no id handed out twice, none skipped); each machine is
// registered at most once and exactly as the clients' own record says; and no job step
// that had committed ran again (from every member's log). Prints a summary; exit code 1
// when a check fails.

import { parseArgs } from 'node:util';
import { errorEntry } from '@kcm/protocol';
import { EmitError, emit, jobStatus, submitJob, waitForJobEnd } from '../../helpers/emit-client';
import { LocalGroup, createMachineParas } from '../helpers/group';
import { countSteps, stepEvents } from '../helpers/logs';
import { sleep, waitFor } from '../helpers/processes';
import { lifecycleClient, statusClient, unreachableClient, type ClientContext, type ClientReport } from './workload';

const { values: flags } = parseArgs({ options: { kills: { type: 'string', default: '20' }, keep: { type: 'boolean', default: false } } });
const KILLS = Number(flags.kills);
const MEMBERS = ['127.0.1.41:18320', '127.0.1.42:18320', '127.0.1.43:18320'];
const LIFECYCLE_HOSTS = ['127.0.2.33', '127.0.2.34'];
const STATUS_HOST = '127.0.2.35';
/** Nothing listens there: create_machine must fail with a reason. */
const UNREACHABLE_HOSTS = ['127.0.2.36', '127.0.2.37'];

const group = new LocalGroup({ name: 'manager-soak', members: MEMBERS, agentHosts: [...LIFECYCLE_HOSTS, STATUS_HOST], agentPort: 18392, keepDir: flags.keep });
const problems: string[] = [];
const check = (ok: boolean, problem: string) => {
  if (!ok) problems.push(problem);
};

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void group.stop().finally(() => process.exit(130)));
}

async function killLeaders(): Promise<number[]> {
  const failovers: number[] = [];
  for (let k = 1; k <= KILLS; k++) {
    await sleep(500 + Math.random() * 3_500); // a random moment in the job stream
    const leader = await group.waitForLeader(MEMBERS, 30_000);
    await group.manager(leader).kill();
    const killedAt = Date.now();
    const next = await group.waitForLeader(MEMBERS.filter((m) => m !== leader), 30_000);
    failovers.push(Date.now() - killedAt);
    console.log(`kill ${k}/${KILLS}: ${leader} killed, ${next} leads after ${Date.now() - killedAt} ms; restarting ${leader}`);
    await group.startManager(leader);
  }
  return failovers;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main(): Promise<void> {
  const started = Date.now();
  await group.start();
  await group.waitForLeader(MEMBERS, 30_000);
  console.log(`group up in ${Date.now() - started} ms (data and logs under ${group.dir})`);

  const runId = `soak-${Date.now()}`;
  const members = () => group.liveMembers();
  const { jobId: permanent } = await submitJob(members, 'create_machine', createMachineParas(STATUS_HOST, group.dir), { requestId: `${runId}-permanent` });
  check((await waitForJobEnd(members, permanent)).status === 'done', `registering ${STATUS_HOST} did not end done`);

  let running = true;
  const ctx: ClientContext = { members, baseDir: group.dir, runId, running: () => running };
  const clients = Promise.all([
    ...LIFECYCLE_HOSTS.map((h) => lifecycleClient(h, ctx)),
    unreachableClient(UNREACHABLE_HOSTS, ctx),
    statusClient('status-a', STATUS_HOST, ctx),
    statusClient('status-b', STATUS_HOST, ctx),
  ]);
  const failovers = await killLeaders();
  running = false;
  const reports = await clients;
  await report(reports, failovers, permanent, started);
}

async function report(reports: ClientReport[], failovers: number[], permanentJob: string, started: number): Promise<void> {
  const jobs = reports.flatMap((r) => r.jobs);
  const members = group.liveMembers();

  // Every acknowledged job ended, as expected, failures with a reason.
  const stuck = jobs.filter((j) => j.stuck);
  check(stuck.length === 0, `${stuck.length} jobs never ended: ${stuck.map((j) => `${j.jobId} (${j.jobType})`).join(', ')}`);
  for (const j of jobs.filter((x) => x.end)) {
    check(j.end!.status === j.expected, `job ${j.jobId} (${j.jobType} by ${j.client}) ended ${j.end!.status}, expected ${j.expected}: ${j.end!.error_info}`);
    if (j.end!.status === 'failed') check(j.end!.error_info.length > 0 && j.end!.error_code !== '0', `job ${j.jobId} failed without a reason`);
  }
  for (const r of reports) for (const u of r.unacknowledged) problems.push(`${r.name}: submission ${u.requestId} never acknowledged: ${u.error}`);

  // Job ids: one per acknowledged request, unique, and consecutive from 1 (no id skipped or reused).
  const ids = [permanentJob, ...jobs.map((j) => j.jobId)].map(Number).sort((a, b) => a - b);
  check(new Set(ids).size === ids.length, `a job id was handed out twice: ${ids.filter((id, i) => ids[i - 1] === id).join(', ')}`);
  check(ids.every((id, i) => id === i + 1), `job ids are not consecutive 1..${ids.length}: first gap after ${ids.find((id, i) => ids[i + 1] !== undefined && ids[i + 1] !== id + 1)}`);
  // The next id must not exist (asked until a member answers: the last restarted one may not know the leader yet).
  const notFound = String(errorEntry('NOT_FOUND').code);
  const beyond = await waitFor(`an answer about job ${ids.length + 1}`, () =>
    jobStatus(members[0], String(ids.length + 1)).then(
      (reply) => reply,
      (err: unknown) => (err instanceof EmitError && err.reply?.error_code === notFound ? err.reply : undefined),
    ), 30_000, 250);
  check(beyond.error_code === notFound, `job ${ids.length + 1} exists (${beyond.job_type}, ${beyond.status}) though no client was acknowledged it`);

  // Registrations: each host at most once per type, as the lifecycle clients recorded.
  for (const m of members) {
    // A member restarted by the last kill may not know the leader yet.
    const summary = await waitFor(`${m} to answer get_machine_summary`, () => emit(m, 'get_machine_summary'), 30_000, 250);
    const list = (summary.attachment as { list_machine: { hostaddr: string; machine_types: string[] }[] }).list_machine;
    const expected = [STATUS_HOST, ...LIFECYCLE_HOSTS.filter((h) => reports.find((r) => r.name === `lifecycle-${h}`)?.registered)].sort();
    check(JSON.stringify(list.map((x) => x.hostaddr).sort()) === JSON.stringify(expected), `${m} lists machines ${list.map((x) => x.hostaddr).join(', ')}, expected ${expected.join(', ')}`);
    for (const x of list) check(x.machine_types.length === 1, `${m}: ${x.hostaddr} registered as ${x.machine_types.join(', ')}`);
  }

  // No committed step ran again: no 'step started' after its 'step done', never two 'step done'.
  const counts = countSteps(stepEvents(MEMBERS.map((member) => ({ member, lines: group.manager(member).logLines() }))));
  let resumedSteps = 0;
  for (const [key, c] of counts) {
    check(c.done <= 1 && c.startedAfterDone === 0, `step ${key} ran again after it committed (started ${c.started}, done ${c.done}, by ${c.startedBy.join(', ')})`);
    if (c.started > 1) resumedSteps++;
  }

  const sorted = [...failovers].sort((a, b) => a - b);
  const by = (status: string) => jobs.filter((j) => j.end?.status === status).length;
  console.log('\n== manager kill soak ==');
  console.log(`duration ${((Date.now() - started) / 1000).toFixed(0)} s, leader kills ${failovers.length}`);
  console.log(`failover (kill -> new leader seen): p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted[sorted.length - 1] ?? 0} ms`);
  console.log(`jobs acknowledged ${ids.length} (ids 1..${ids[ids.length - 1]}), done ${by('done') + 1}, failed ${by('failed')}, stuck ${stuck.length}`);
  for (const r of reports) console.log(`  ${r.name}: ${r.jobs.length} jobs, ${r.retries} retried submissions, ${r.unacknowledged.length} unacknowledged`);
  console.log(`steps run on more than one leader (uncommitted when killed): ${resumedSteps}`);
  console.log(problems.length === 0 ? 'all checks passed' : `${problems.length} problems:\n  ${problems.slice(0, 60).join('\n  ')}`);
  if (problems.length > 0) process.exitCode = 1;
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => group.stop());

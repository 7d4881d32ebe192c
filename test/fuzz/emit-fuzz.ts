// Runs fuzz cases (emit-cases.ts) against a real 3-manager group and counts what must never
// happen: a manager process that exits, a 5xx reply, a reply without the envelope, and a
// state change no accepted request accounts for.
//
// The group holds real state, built through Emit before the first case: the hosts the
// fixtures name (test/fixtures/emit) registered as machines, a backup storage, and a cluster
// on them, so fuzzed requests that name them get past "no such cluster" into the checks of
// a live one. The hosts' agents are the hollow fleet (bench/scale/hollow-agents.ts): it
// answers every agent call and runs no engine, so the jobs the fuzz gets accepted run to
// their end in a fraction of a second. This tests the gateway and the job service, not
// what a job does on an engine.
//
// Cases go in batches. Around each batch a summary of the replicated state (machines,
// clusters with each one's detail, backup storages, the job counter) is taken, once every
// job accepted so far has ended; a part of it may change only when an accepted job of a
// type that changes that part ran in the batch, and the job counter only by the number of
// jobs accepted. A batch that deletes the cluster or its machines is followed by building
// them again, so every batch starts from a populated group.

import type { ChildProcess } from 'node:child_process';
import { request } from 'undici';
import { startHollowFleet } from '../../bench/scale/fleet-process';
import { emit, emitRaw, jobStatus, waitForJobEnd } from '../helpers/emit-client';
import { LocalGroup } from '../manager/helpers/group';
import { waitFor } from '../manager/helpers/processes';
import { authHeader } from '../helpers/tokens';
import { seededRandom } from '../../libs/raft/test/seeded-random';
import { CaseMaker, loadFixtures, type FuzzCase } from './emit-cases';

export const FUZZ_MEMBERS = ['127.0.1.91:58391', '127.0.1.92:58391', '127.0.1.93:58391'];
/** The hosts the fixtures name: three storage machines and one computer, as create_cluster's fixture places them. */
const FUZZ_HOSTS = { storage: ['127.0.2.1', '127.0.2.2', '127.0.2.3'], computer: ['127.0.2.4'] };
/** Where the hollow fleet serves those hosts' agents. */
const FUZZ_AGENT_PORT = 58399;
const ENVELOPE_FIELDS = ['version', 'error_code', 'error_info', 'status', 'job_id', 'job_type', 'attachment'];
/**
 * The loops that act on instances on their own (reconciling, failure detection, binlog
 * archiving, rollback retries) would change cluster state between batches with no request
 * behind it: they run once an hour here, as in the hollow benches (bench/scale/hollow-group.ts).
 */
const NO_ENGINE_LOOPS = { reconcileIntervalMs: 3_600_000, failureDetectIntervalMs: 3_600_000, binlogArchiveIntervalMs: 3_600_000, rollbackRetryIntervalMs: 3_600_000 };

/** The parts of the state a summary compares, and the job types whose runs may change each. */
type Part = 'machines' | 'clusters' | 'storages';
const MACHINE_JOBS = new Set(['create_machine', 'delete_machine', 'set_machine']);
const STORAGE_JOBS = new Set(['create_backup_storage', 'delete_backup_storage']);
/** Jobs that change neither machines, clusters nor storages. */
const OTHER_JOBS = new Set(['create_token', 'delete_token', 'raft_mission', 'cancel_job']);
export function mayChange(part: Part, jobType: string): boolean {
  if (part === 'machines') return MACHINE_JOBS.has(jobType);
  // A backup set is listed with its storage (backup_sets) and with its cluster.
  if (part === 'storages') return STORAGE_JOBS.has(jobType) || /backup|restore/.test(jobType);
  return !MACHINE_JOBS.has(jobType) && !STORAGE_JOBS.has(jobType) && !OTHER_JOBS.has(jobType);
}

export interface FuzzFigures {
  cases: number;
  processExits: number;
  replies5xx: number;
  repliesWithoutEnvelope: number;
  unaccountedStateChanges: number;
  accepted: number;
  /** Accepted jobs by how they ended ('done', 'failed', or 'open' when still running at the end). */
  acceptedEnded: Record<string, number>;
  /** Accepted jobs still running at the end, as `<id> <job_type>`. */
  stillOpen: string[];
  /** The least the group held at the start of any batch: what each comparison compared. */
  leastState: { machines: number; clusters: number; storages: number; finishedJobs: number };
  /** Times the cluster, its machines or the storage were built again after a batch removed them. */
  rebuilt: number;
  byStatus: Record<string, number>;
  failures: string[];
  seconds: number;
}

interface Summary {
  machines: string;
  clusters: string;
  storages: string;
  jobCounter: number;
  counts: { machines: number; clusters: number; storages: number };
}

export interface FuzzGroup {
  group: LocalGroup;
  stop(): Promise<void>;
}

/** The 3-manager group and the hollow fleet serving the fixtures' hosts; populate() fills it. */
export async function startFuzzGroup(): Promise<FuzzGroup> {
  const fleet: ChildProcess = await startHollowFleet([...FUZZ_HOSTS.storage, ...FUZZ_HOSTS.computer], FUZZ_AGENT_PORT);
  const group = new LocalGroup({
    name: 'fuzz-emit',
    members: FUZZ_MEMBERS,
    agentHosts: [],
    agentPort: FUZZ_AGENT_PORT,
    // The fuzzer's token may send as fast as it can: the limit is tested on its own.
    managerConfig: { tickMs: 50, emitRatePerSecond: 0, ...NO_ENGINE_LOOPS },
  });
  const stop = async () => {
    await group.stop();
    fleet.kill('SIGTERM');
  };
  try {
    await group.start();
    await group.waitForLeader();
  } catch (err) {
    await stop();
    throw err;
  }
  return { group, stop };
}

/** Runs a job built from its fixture (with `change` over its paras) and fails unless it ends done. */
async function runFixtureJob(member: string, jobType: string, change: Record<string, unknown>): Promise<void> {
  const fixture = loadFixtures().find((f) => f.name === jobType);
  if (!fixture) throw new Error(`no fixture ${jobType}`);
  const ack = await emit(member, jobType, { ...(fixture.envelope.paras as Record<string, unknown>), ...change });
  const end = await waitForJobEnd(FUZZ_MEMBERS, ack.job_id, 30_000);
  if (end.status !== 'done') throw new Error(`populating the fuzz group: ${jobType} ${end.status}: ${end.error_info}`);
}

/**
 * Builds what is missing of the fuzz group's state: the fixtures' hosts as machines in
 * service, a backup storage, a cluster. Counts in `built.jobs` the jobs that took (none when all was there).
 */
async function populate(member: string, built = { jobs: 0 }): Promise<void> {
  const machines = ((await emit(member, 'get_machine_summary')).attachment as { list_machine: { hostaddr: string; node_stats: string }[] }).list_machine;
  for (const [machineType, hosts] of Object.entries(FUZZ_HOSTS)) {
    for (const hostaddr of hosts) {
      const machine = machines.find((m) => m.hostaddr === hostaddr);
      if (machine?.node_stats === 'running') continue;
      // Missing (delete_machine), or taken out of service (set_machine's fixture sets it dead).
      if (machine) await runFixtureJob(member, 'set_machine', { hostaddr, node_stats: 'running' });
      else await runFixtureJob(member, 'create_machine', { hostaddr, machine_type: machineType });
      built.jobs++;
    }
  }
  if (((await emit(member, 'get_backup_storage')).attachment as { list_backup_storage: unknown[] }).list_backup_storage.length === 0) {
    await runFixtureJob(member, 'create_backup_storage', { port: String(FUZZ_AGENT_PORT) });
    built.jobs++;
  }
  if (((await emit(member, 'get_cluster_summary')).attachment as { list_cluster: unknown[] }).list_cluster.length === 0) {
    // The fixture's own sizes are refused (max_connections 6): sizes the machines take.
    await runFixtureJob(member, 'create_cluster', { max_connections: '100', innodb_size: '64', cpu_cores: '2', max_storage_size: '1' });
    built.jobs++;
  }
}

/** JSON of a query's answer without the age of its live measurement (the one field that moves by itself). */
const stateJson = (value: unknown) => JSON.stringify(value, (k, v: unknown) => (k === 'measured_age_ms' ? undefined : v));

async function summary(member: string, knownJobs: number): Promise<Summary> {
  const q = async (jobType: string, paras: Record<string, unknown> = {}) => (await emit(member, jobType, paras)).attachment as Record<string, unknown[]>;
  // The job counter: the first id get_status itself refuses as never issued (a job that
  // failed because its cluster "does not exist" is answered under its own job_type).
  let jobCounter = knownJobs;
  for (;;) {
    const reply = await emitRaw(member, 'get_status', {}, { jobId: String(jobCounter + 1) });
    if (reply.job_type === 'get_status' && /^job \d+ does not exist/.test(reply.error_info)) break;
    jobCounter++;
  }
  const machines = await q('get_machine_summary');
  const clusters = await q('get_cluster_summary');
  const details = [];
  for (const c of clusters.list_cluster as { cluster_id: string }[]) details.push(await q('get_cluster_detail', { cluster_id: c.cluster_id }));
  const storages = await q('get_backup_storage');
  return {
    machines: stateJson(machines),
    clusters: stateJson({ clusters, details }),
    storages: stateJson(storages),
    jobCounter,
    counts: { machines: machines.list_machine.length, clusters: clusters.list_cluster.length, storages: storages.list_backup_storage.length },
  };
}

/**
 * Waits (up to `timeoutMs`) for the jobs accepted in this batch (`fresh`) to end; removes
 * every open job that has ended from `open` and counts how they ended. A job still open
 * from an earlier batch is not waited for again.
 */
async function settle(member: string, open: Map<string, string>, fresh: ReadonlySet<string>, ended: Record<string, number>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let first = true; first || ([...fresh].some((id) => open.has(id)) && Date.now() < deadline); first = false) {
    for (const id of [...open.keys()]) {
      const status = (await jobStatus(member, id)).status;
      if (status !== 'done' && status !== 'failed') continue;
      ended[status] = (ended[status] ?? 0) + 1;
      open.delete(id);
    }
    if ([...fresh].some((id) => open.has(id))) await new Promise((r) => setTimeout(r, 100));
  }
}

async function send(member: string, c: FuzzCase): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = {};
  if (c.contentType !== null) headers['content-type'] = c.contentType;
  if (c.auth === 'admin' || c.auth === 'viewer') headers.authorization = authHeader(c.auth).authorization;
  if (c.auth === 'bad') headers.authorization = 'Bearer not-a-token-at-all-0000000000';
  const res = await request(`http://${member}/HttpService/Emit`, { method: 'POST', headers, body: c.body, headersTimeout: 30_000, bodyTimeout: 30_000 });
  return { status: res.statusCode, text: await res.body.text() };
}

/** How long a batch waits for the jobs it got accepted to end (see the call). */
const SETTLE_MS = 10_000;

export async function runFuzz(fuzzGroup: FuzzGroup, opts: { cases: number; seed: number; batch?: number; concurrency?: number; log?: (line: string) => void }): Promise<FuzzFigures> {
  const { group } = fuzzGroup;
  const started = Date.now();
  const maker = new CaseMaker(seededRandom(opts.seed));
  const batch = opts.batch ?? 500;
  const concurrency = opts.concurrency ?? 16;
  const figures: FuzzFigures = {
    cases: 0, processExits: 0, replies5xx: 0, repliesWithoutEnvelope: 0, unaccountedStateChanges: 0, accepted: 0, acceptedEnded: {}, stillOpen: [],
    leastState: { machines: Infinity, clusters: Infinity, storages: Infinity, finishedJobs: Infinity }, rebuilt: 0, byStatus: {}, failures: [], seconds: 0,
  };
  const fail = (line: string) => {
    if (figures.failures.length < 50) figures.failures.push(line);
  };
  /** Accepted jobs that have not ended, by id: their type accounts for changes until they end. */
  const open = new Map<string, string>();
  let leader = await group.waitForLeader();
  await populate(leader);
  let before = await summary(leader, 0);
  while (figures.cases < opts.cases) {
    const least = figures.leastState;
    least.machines = Math.min(least.machines, before.counts.machines);
    least.clusters = Math.min(least.clusters, before.counts.clusters);
    least.storages = Math.min(least.storages, before.counts.storages);
    least.finishedJobs = Math.min(least.finishedJobs, before.jobCounter - open.size);
    const cases = Array.from({ length: Math.min(batch, opts.cases - figures.cases) }, () => maker.next());
    /** Types of the jobs that ran during this batch: accepted in it, or still open from before. */
    const ran = new Set(open.values());
    let acceptedJobs = 0;
    const fresh = new Set<string>();
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++];
        const member = FUZZ_MEMBERS[Math.floor(Math.random() * FUZZ_MEMBERS.length)];
        let reply: { status: number; text: string };
        try {
          reply = await send(member, c);
        } catch (err) {
          figures.repliesWithoutEnvelope++;
          fail(`no reply (${(err as Error).message}) to ${c.what}`);
          continue;
        }
        figures.byStatus[reply.status] = (figures.byStatus[reply.status] ?? 0) + 1;
        if (reply.status >= 500) {
          figures.replies5xx++;
          fail(`HTTP ${reply.status} ${reply.text.slice(0, 200)} to ${c.what}`);
        }
        let env: Record<string, unknown> | undefined;
        try {
          env = JSON.parse(reply.text) as Record<string, unknown>;
        } catch {
          env = undefined;
        }
        if (!env || typeof env !== 'object' || ENVELOPE_FIELDS.some((f) => !(f in env!))) {
          figures.repliesWithoutEnvelope++;
          fail(`no envelope (HTTP ${reply.status}: ${reply.text.slice(0, 200)}) to ${c.what}`);
          continue;
        }
        if (env.error_code === '0' && typeof env.job_id === 'string' && env.job_id !== '' && env.status === 'accept') {
          acceptedJobs++;
          open.set(env.job_id, String(env.job_type));
          fresh.add(env.job_id);
          ran.add(String(env.job_type));
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    figures.cases += cases.length;
    figures.accepted += acceptedJobs;
    for (const m of group.managers.values()) {
      if (!m.running) {
        figures.processExits++;
        fail(`${m.name} exited during the batch ending at case ${figures.cases}`);
        m.start();
      }
    }
    leader = await group.waitForLeader(undefined, 30_000);
    // Jobs on the hollow fleet end within a second or two; one that does not stays open (its type keeps accounting for changes) and is not waited for again.
    // 10 s, not 30: a batch whose fresh job queues behind one that never ends on the hollow
    // fleet waited the whole bound, most of the default suite's 100 s fuzz (three 30 s waits).
    await settle(leader, open, fresh, figures.acceptedEnded, SETTLE_MS);
    const after = await summary(leader, before.jobCounter);
    const changed: string[] = (['machines', 'clusters', 'storages'] as const).filter((part) => after[part] !== before[part] && ![...ran].some((t) => mayChange(part, t)));
    if (after.jobCounter !== before.jobCounter + acceptedJobs) changed.push(`jobs ${before.jobCounter} + ${acceptedJobs} accepted != ${after.jobCounter}`);
    if (changed.length > 0) {
      figures.unaccountedStateChanges += changed.length;
      fail(`state changed beyond the accepted requests in the batch ending at case ${figures.cases} (jobs run: ${[...ran].join(', ') || 'none'}): ${changed.join(', ')}`);
    }
    // Build again what the batch's jobs removed, so that the next batch starts populated too.
    const built = { jobs: 0 };
    await waitFor('the group populated again', () => populate(leader, built).then(() => true), 60_000, 1_000);
    if (built.jobs > 0) figures.rebuilt++;
    before = built.jobs > 0 ? await summary(leader, after.jobCounter) : after;
    opts.log?.(`${figures.cases} cases, ${figures.accepted} accepted (${JSON.stringify(figures.acceptedEnded)}), ${figures.replies5xx} 5xx, ${figures.repliesWithoutEnvelope} without envelope, ${figures.unaccountedStateChanges} unaccounted changes, ${figures.processExits} exits, rebuilt ${figures.rebuilt}`);
  }
  figures.acceptedEnded.open = open.size;
  figures.stillOpen = [...open].map(([id, type]) => `${id} ${type}`);
  figures.seconds = (Date.now() - started) / 1000;
  return figures;
}

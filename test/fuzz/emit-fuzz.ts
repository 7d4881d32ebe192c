// Runs fuzz cases (emit-cases.ts) against a real 3-manager group and counts what must never
// happen: a manager process that exits, a 5xx reply, a reply without the envelope, and a
// state change no accepted request accounts for. Cases go in batches; around each batch a
// state summary (machines, clusters, backup storages, the job counter) is taken, and the
// only change allowed is the job counter moving by the number of jobs the batch's accepted
// replies announced (with no agents, no accepted job can register a machine or a cluster).

import { request } from 'undici';
import { emitRaw } from '../manager/helpers/emit-client';
import { LocalGroup } from '../manager/helpers/group';
import { authHeader } from '../helpers/tokens';
import { seededRandom } from '../../libs/raft/test/seeded-random';
import { CaseMaker, type FuzzCase } from './emit-cases';

export const FUZZ_MEMBERS = ['127.0.1.91:58391', '127.0.1.92:58391', '127.0.1.93:58391'];
/** No agent listens here: accepted jobs fail at their first agent call and change nothing. */
const FUZZ_AGENT_PORT = 58399;
const ENVELOPE_FIELDS = ['version', 'error_code', 'error_info', 'status', 'job_id', 'job_type', 'attachment'];

export interface FuzzFigures {
  cases: number;
  processExits: number;
  replies5xx: number;
  repliesWithoutEnvelope: number;
  unaccountedStateChanges: number;
  accepted: number;
  byStatus: Record<string, number>;
  failures: string[];
  seconds: number;
}

interface Summary {
  machines: string;
  clusters: string;
  storages: string;
  jobCounter: number;
}

export async function startFuzzGroup(): Promise<LocalGroup> {
  const group = new LocalGroup({
    name: 'fuzz-emit',
    members: FUZZ_MEMBERS,
    agentHosts: [],
    agentPort: FUZZ_AGENT_PORT,
    // The fuzzer's token may send as fast as it can: the limit is tested on its own.
    managerConfig: { tickMs: 50, emitRatePerSecond: 0 },
  });
  await group.start();
  await group.waitForLeader();
  return group;
}

async function summary(member: string, knownJobs: number): Promise<Summary> {
  const q = async (jobType: string) => JSON.stringify((await emitRaw(member, jobType, {})).attachment);
  // The job counter: the first id get_status says "does not exist" for (never issued).
  let jobCounter = knownJobs;
  for (;;) {
    const reply = await emitRaw(member, 'get_status', {}, { jobId: String(jobCounter + 1) });
    if (reply.error_code !== '0' && /does not exist/.test(reply.error_info)) break;
    jobCounter++;
  }
  return { machines: await q('get_machine_summary'), clusters: await q('get_cluster_summary'), storages: await q('get_backup_storage'), jobCounter };
}

async function send(member: string, c: FuzzCase): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = {};
  if (c.contentType !== null) headers['content-type'] = c.contentType;
  if (c.auth === 'admin' || c.auth === 'viewer') headers.authorization = authHeader(c.auth).authorization;
  if (c.auth === 'bad') headers.authorization = 'Bearer not-a-token-at-all-0000000000';
  const res = await request(`http://${member}/HttpService/Emit`, { method: 'POST', headers, body: c.body, headersTimeout: 30_000, bodyTimeout: 30_000 });
  return { status: res.statusCode, text: await res.body.text() };
}

export async function runFuzz(group: LocalGroup, opts: { cases: number; seed: number; batch?: number; concurrency?: number; log?: (line: string) => void }): Promise<FuzzFigures> {
  const started = Date.now();
  const maker = new CaseMaker(seededRandom(opts.seed));
  const batch = opts.batch ?? 500;
  const concurrency = opts.concurrency ?? 16;
  const figures: FuzzFigures = { cases: 0, processExits: 0, replies5xx: 0, repliesWithoutEnvelope: 0, unaccountedStateChanges: 0, accepted: 0, byStatus: {}, failures: [], seconds: 0 };
  const fail = (line: string) => {
    if (figures.failures.length < 50) figures.failures.push(line);
  };
  const leader = await group.waitForLeader();
  let before = await summary(leader, 0);
  while (figures.cases < opts.cases) {
    const cases = Array.from({ length: Math.min(batch, opts.cases - figures.cases) }, () => maker.next());
    let acceptedJobs = 0;
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
        if (env.error_code === '0' && typeof env.job_id === 'string' && env.job_id !== '' && env.status === 'accept') acceptedJobs++;
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
    const now = await group.waitForLeader(undefined, 30_000);
    const after = await summary(now, before.jobCounter);
    const changed: string[] = (['machines', 'clusters', 'storages'] as const).filter((k) => after[k] !== before[k]);
    if (after.jobCounter !== before.jobCounter + acceptedJobs) changed.push(`jobs ${before.jobCounter} + ${acceptedJobs} accepted != ${after.jobCounter}`);
    if (changed.length > 0) {
      figures.unaccountedStateChanges += changed.length;
      fail(`state changed beyond the accepted requests in the batch ending at case ${figures.cases}: ${changed.join(', ')}`);
    }
    before = after;
    opts.log?.(`${figures.cases} cases, ${figures.accepted} accepted, ${figures.replies5xx} 5xx, ${figures.repliesWithoutEnvelope} without envelope, ${figures.unaccountedStateChanges} unaccounted changes, ${figures.processExits} exits`);
  }
  figures.seconds = (Date.now() - started) / 1000;
  return figures;
}

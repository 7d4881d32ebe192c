// The set-up of the real-engine tests that SIGKILL the manager leader while a job runs: a
// group of manager processes and one agent process per host (test/manager/helpers/group.ts),
// every host registered as a machine (machines.ts) with its directories under the group's
// temp folder, and one job runner that submits to whichever members are alive and waits for
// the job's end across leader changes. Each caller brings an address block and port ranges
// no other test uses. group-cluster.ts builds a cluster on it.

import { randomUUID } from 'node:crypto';
import { chmodSync } from 'node:fs';
import type { ReplyEnvelope } from '@kcm/protocol';
import { emit, EmitError, submitJob, waitForJobEnd } from '../helpers/emit-client';
import { LocalGroup, type GroupOptions } from '../manager/helpers/group';
import { sleep } from '../manager/helpers/processes';
import { enginePidsUnder, killAll, removeCgroupsOf } from './cluster-fixture';
import { hostDirs, registerMachines, type MachineDirs, type MachineOptions } from './machines';

export interface GroupFixtureOptions {
  /** Used in the temp folder's name and the jobs' request ids. */
  name: string;
  /** The managers' HTTP addresses `<host>:<port>` (127.0.1.x). */
  members: string[];
  /** The agents' hosts (127.0.2.x), one agent process each. */
  hosts: readonly string[];
  agentPort: number;
  managerConfig?: GroupOptions['managerConfig'];
  /** How the hosts are registered: port ranges, which are computer machines too (default machines.ts's). */
  machines?: Omit<MachineOptions, 'hosts'>;
  /** Called with the group before any process starts (e.g. to run some from another build's checkout: ManagedProcess.root). */
  beforeStart?: (group: LocalGroup) => void;
}

export interface GroupFixture {
  group: LocalGroup;
  /** The members whose process runs. */
  live(): string[];
  /** Host i's machine directories (datadir, comp_datadir, ...). */
  dirs(i: number): MachineDirs;
  /**
   * Submits a job until a member acknowledges it (one request id across retries, so a lost
   * reply never makes a second job) and returns its id. To `to` (default: the live members).
   */
  submit(jobType: string, paras: Record<string, unknown>, to?: readonly string[]): Promise<string>;
  /** Polls get_status on the live members until the job is done or failed. */
  waitForEnd(jobId: string, timeoutMs?: number): Promise<ReplyEnvelope>;
  /** submit, then waitForEnd: the job's final get_status reply, whatever its status. */
  runJob(jobType: string, paras: Record<string, unknown>, timeoutMs?: number): Promise<ReplyEnvelope>;
  /** runJob that throws, naming the job and its error, unless the job ended done. */
  runDone(jobType: string, paras: Record<string, unknown>, timeoutMs?: number): Promise<ReplyEnvelope>;
  /** A sync query, to the live members in turn until one answers (a member just restarted may know no leader yet). */
  query(jobType: string, paras: Record<string, unknown>): Promise<ReplyEnvelope>;
  /** The highest job id this fixture was acknowledged: a job the manager starts by itself next gets the one after. */
  lastJobId(): number;
  /** Stops every process, kills the engines they left and removes the hosts' kcm cgroups. */
  close(): Promise<void>;
}

/** Starts the group, waits for a leader and registers the hosts' machines; on failure cleans up and throws. */
export async function startGroupFixture(opts: GroupFixtureOptions): Promise<GroupFixture> {
  const group = new LocalGroup({ name: opts.name, members: opts.members, agentHosts: [...opts.hosts], agentPort: opts.agentPort, managerConfig: opts.managerConfig });
  chmodSync(group.dir, 0o755); // mysql and postgres traverse it to their directories
  let lastJobId = 0;
  const live = () => group.liveMembers();
  const dirs = (i: number) => hostDirs(group.dir, i);
  const submit = async (jobType: string, paras: Record<string, unknown>, to?: readonly string[]) => {
    const ack = await submitJob(to ?? live, jobType, paras, { requestId: `${opts.name}-${randomUUID()}` });
    lastJobId = Math.max(lastJobId, Number(ack.jobId));
    return ack.jobId;
  };
  const waitForEnd = (jobId: string, timeoutMs = 120_000) => waitForJobEnd(live, jobId, timeoutMs);
  const runJob = async (jobType: string, paras: Record<string, unknown>, timeoutMs = 120_000) => waitForEnd(await submit(jobType, paras), timeoutMs);
  const runDone = async (jobType: string, paras: Record<string, unknown>, timeoutMs = 120_000) => {
    const reply = await runJob(jobType, paras, timeoutMs);
    if (reply.status !== 'done') throw new Error(`${jobType}: ${reply.error_info}`);
    return reply;
  };
  const query = async (jobType: string, paras: Record<string, unknown>) => {
    const deadline = Date.now() + 30_000;
    for (let attempt = 0; ; attempt++) {
      const members = live();
      try {
        return await emit(members[attempt % members.length], jobType, paras);
      } catch (err) {
        if (!(err instanceof EmitError) || !err.retryable || Date.now() > deadline) throw err;
        await sleep(200);
      }
    }
  };
  const close = async () => {
    const engines = await enginePidsUnder(group.dir);
    await group.stop();
    killAll(engines);
    await removeCgroupsOf(opts.hosts);
  };
  try {
    opts.beforeStart?.(group);
    await group.start();
    await group.waitForLeader();
    await registerMachines({ runJob, dirs }, { ...opts.machines, hosts: opts.hosts });
  } catch (err) {
    await close();
    throw err;
  }
  return { group, live, dirs, submit, waitForEnd, runJob, runDone, query, lastJobId: () => lastJobId, close };
}

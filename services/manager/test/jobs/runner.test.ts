import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { createLogger, silentLogger } from '@kcm/common';
import { KcmError } from '@kcm/protocol';
import { CommandKind } from '../../src/meta/commands';
import { LocalStore, until } from '../helpers/local-store';
import { stepServices } from '../helpers/step-services';
import { JobRunner, type JobRegistry } from '../../src/jobs/framework/runner';
import { ManagerService } from '../../src/submit/manager-service';
import type { JobDefinition } from '../../src/jobs/framework/workflow';
import { testSecretBox } from '../../../../test/helpers/secrets';

async function submit(store: LocalStore, jobType: string, lockKey: string | null = null): Promise<string> {
  const out = await store.propose({ kind: CommandKind.JobSubmitted, at: 0, jobType, sentJobType: jobType, paras: {}, requestId: null, lockKey });
  return (out as { ok: true; value: { jobId: string } }).value.jobId;
}

function countingJob(runs: Record<string, number>, opts: { failAt?: string; blockAt?: { step: string; release: Promise<void> } } = {}): JobDefinition {
  const step = (name: string) => ({
    name,
    async run() {
      runs[name] = (runs[name] ?? 0) + 1;
      if (opts.blockAt?.step === name && runs[name] === 1) await opts.blockAt.release;
      if (opts.failAt === name) throw KcmError.of('AGENT_UNREACHABLE', `agent of ${name} did not answer`);
      return { made: name };
    },
  });
  return {
    jobType: 'three_steps',
    lockKey: () => null,
    steps: () => [step('a'), step('b'), step('c')],
    result: (outputs) => ({ outputs }),
    rollback: async () => {
      runs.rollback = (runs.rollback ?? 0) + 1;
    },
  };
}

const registryOf = (def: JobDefinition): JobRegistry => new Map([[def.jobType, def]]);

describe('job runner', () => {
  it('runs the steps in order, commits each output and ends done with the result', async () => {
    const store = new LocalStore();
    const runs: Record<string, number> = {};
    const runner = new JobRunner(store, registryOf(countingJob(runs)), stepServices(store));
    const id = await submit(store, 'three_steps');
    runner.start();
    await until(() => store.s.jobs[id].status === 'done');
    expect(runs).toEqual({ a: 1, b: 1, c: 1 });
    expect(store.s.jobs[id].result?.attachment).toEqual({ outputs: { a: { made: 'a' }, b: { made: 'b' }, c: { made: 'c' } } });
    await runner.stop();
  });

  it('a failing step ends the job failed, naming the step and keeping the error code, after rollback', async () => {
    const store = new LocalStore();
    const runs: Record<string, number> = {};
    const runner = new JobRunner(store, registryOf(countingJob(runs, { failAt: 'b' })), stepServices(store));
    const id = await submit(store, 'three_steps');
    runner.start();
    await until(() => store.s.jobs[id].status === 'failed');
    const result = store.s.jobs[id].result!;
    expect(result.errorCode).toBe(KcmError.of('AGENT_UNREACHABLE', '').code);
    expect(result.errorInfo).toBe('step 2 of 3 (b) failed: agent of b did not answer');
    expect(runs).toEqual({ a: 1, b: 1, rollback: 1 });
    await runner.stop();
  });

  it('a new leader resumes at the first unfinished step; committed steps never run twice', async () => {
    const store = new LocalStore();
    const runs: Record<string, number> = {};
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    const def = countingJob(runs, { blockAt: { step: 'b', release: blocked } });
    const oldLeader = new JobRunner(store, registryOf(def), stepServices(store));
    const id = await submit(store, 'three_steps');
    oldLeader.start();
    await until(() => runs.b === 1);
    // Leadership is lost while step b runs: its commit fails and the job is left unfinished.
    store.failProposals = true;
    const stopped = oldLeader.stop();
    release();
    await stopped;
    expect(store.s.jobs[id].status).toBe('ongoing');
    expect(Object.keys(store.s.jobs[id].stepOutputs)).toEqual(['0']);

    store.failProposals = false;
    const newLeader = new JobRunner(store, registryOf(def), stepServices(store));
    newLeader.start();
    await until(() => store.s.jobs[id].status === 'done');
    expect(runs).toEqual({ a: 1, b: 2, c: 1 });
    await newLeader.stop();
  });

  it('jobs on the same cluster run one at a time in submission order; the next waits in started', async () => {
    const store = new LocalStore();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const def: JobDefinition = {
      jobType: 'one_step',
      lockKey: () => 'cluster:1',
      steps: () => [{ name: 'work', run: async (ctx) => { order.push(`start ${ctx.jobId}`); if (ctx.jobId === '1') await gate; order.push(`end ${ctx.jobId}`); } }],
      result: () => ({}),
    };
    const first = await submit(store, 'one_step', 'cluster:1');
    const second = await submit(store, 'one_step', 'cluster:1');
    const runner = new JobRunner(store, registryOf(def), stepServices(store));
    runner.start();
    await until(() => order.length === 1);
    expect(store.s.jobs[second].status).toBe('started');
    release();
    await until(() => store.s.jobs[second].status === 'done');
    expect(order).toEqual([`start ${first}`, `end ${first}`, `start ${second}`, `end ${second}`]);
    await runner.stop();
  });

  it('a job started by its submission runs without a JobStarted commit; one submitted without step names gets it', async () => {
    const store = new LocalStore();
    const kinds: number[] = [];
    const propose = store.propose.bind(store);
    store.propose = async (cmd) => {
      kinds.push(cmd.kind);
      return propose(cmd);
    };
    const runs: Record<string, number> = {};
    const runner = new JobRunner(store, registryOf(countingJob(runs)), stepServices(store));
    const out = await store.propose({ kind: CommandKind.JobSubmitted, at: 0, jobType: 'three_steps', sentJobType: 'three_steps', paras: {}, requestId: null, lockKey: null, stepNames: ['a', 'b', 'c'] });
    const startedAtSubmission = (out as { ok: true; value: { jobId: string } }).value.jobId;
    expect(store.s.jobs[startedAtSubmission].status).toBe('ongoing');
    runner.start();
    await until(() => store.s.jobs[startedAtSubmission].status === 'done');
    expect(kinds).not.toContain(CommandKind.JobStarted);
    expect(runs).toEqual({ a: 1, b: 1, c: 1 });

    const legacy = await submit(store, 'three_steps');
    runner.notify(); // the manager wires this to every applied submission
    await until(() => store.s.jobs[legacy].status === 'done');
    expect(kinds.filter((k) => k === CommandKind.JobStarted)).toHaveLength(1);
    await runner.stop();
  });

  it('a job whose submission recorded other steps than this kcm defines fails as INTERNAL without running', async () => {
    const store = new LocalStore();
    const runs: Record<string, number> = {};
    const runner = new JobRunner(store, registryOf(countingJob(runs)), stepServices(store));
    const out = await store.propose({ kind: CommandKind.JobSubmitted, at: 0, jobType: 'three_steps', sentJobType: 'three_steps', paras: {}, requestId: null, lockKey: null, stepNames: ['a', 'x'] });
    const id = (out as { ok: true; value: { jobId: string } }).value.jobId;
    runner.start();
    await until(() => store.s.jobs[id].status === 'failed');
    expect(store.s.jobs[id].result?.errorInfo).toContain('cannot be resumed safely');
    expect(runs).toEqual({});
    await runner.stop();
  });

  it('a step failing with a catalog error and no rollback is logged once at info: the job finished line, with its code', async () => {
    const chunks: string[] = [];
    const destination = new Writable({ write: (chunk, _enc, done) => done(void chunks.push(String(chunk))) });
    const store = new LocalStore();
    const runs: Record<string, number> = {};
    const { rollback: _none, ...noRollback } = countingJob(runs, { failAt: 'b' });
    const runner = new JobRunner(store, registryOf(noRollback), stepServices(store, { logger: createLogger({ name: 'jobs', level: 'info', destination }) }));
    const id = await submit(store, 'three_steps');
    runner.start();
    await until(() => store.s.jobs[id].status === 'failed');
    await runner.stop();
    const lines = chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.msg === 'step failed')).toEqual([]);
    expect(lines.filter((l) => l.msg === 'job finished')).toMatchObject([{ jobId: id, ok: false, errorCode: KcmError.of('AGENT_UNREACHABLE', '').code, errorInfo: expect.stringContaining('step 2 of 3 (b) failed') }]);
  });

  it('a job type with no runner fails cleanly as UNSUPPORTED', async () => {
    const store = new LocalStore();
    const runner = new JobRunner(store, new Map(), stepServices(store));
    const id = await submit(store, 'mystery');
    runner.start();
    await until(() => store.s.jobs[id].status === 'failed');
    expect(store.s.jobs[id].result?.errorInfo).toMatch(/no runner/);
    await runner.stop();
  });

  it('keeps the job history to the configured number of finished jobs, dropping the oldest finished', async () => {
    const store = new LocalStore();
    const runner = new JobRunner(store, registryOf(countingJob({})), stepServices(store), {}, { keepFinishedJobs: 2 });
    runner.start();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const id = await submit(store, 'three_steps');
      ids.push(id);
      runner.notify(); // as the manager does on each applied submission
      await until(() => store.s.jobs[id]?.status === 'done');
    }
    expect(Object.keys(store.s.jobs)).toEqual(ids.slice(2));
    // get_status tells a dropped job from one that never existed.
    const service = new ManagerService({ store, registry: new Map(), queries: new Map(), linearizableRead: async () => {}, secrets: testSecretBox() });
    await expect(service.getStatus(ids[0])).rejects.toThrow(`job ${ids[0]} finished and is no longer kept: the job history keeps only the newest finished jobs (finishedJobsKept)`);
    await expect(service.getStatus('99')).rejects.toThrow('job 99 does not exist');
    await runner.stop();
  });
});

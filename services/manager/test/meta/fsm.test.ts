import { describe, expect, it } from 'vitest';
import { CommandKind, decodeCommand, encodeCommand, encodeCommands, type Command, type JobSubmitted, type MachineRegistered } from '../../src/meta/commands';
import { requestDigest } from '../../src/meta/request-digest';
import { applyCommand, applyLogged } from '../../src/meta/fsm';
import { UnknownCommandKindError } from '../../src/meta/apply-stop';
import { rebuildFinishedJobs, runnableJobs } from '../../src/meta/jobs';
import { allocatePorts, releasePorts } from '../../src/meta/ports';
import { restoreMeta, snapshotMeta } from '../../src/meta/snapshot/image';
import { emptyMetaState, type MetaState } from '../../src/meta/state';

const at = 1_700_000_000_000;

function machine(hostaddr: string, machineType: 'storage' | 'computer', portLow: number, portHigh: number): MachineRegistered {
  return {
    kind: CommandKind.MachineRegistered, at, hostaddr, machineType, portLow, portHigh, rackId: 'r1',
    datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1024, totalCpuCores: 2, facts: null,
  };
}

/** Applies through the wire encoding, as a follower would. */
function apply(state: MetaState, cmd: Command) {
  return applyCommand(state, decodeCommand(encodeCommand(cmd)) as Command);
}

function submit(state: MetaState, lockKey: string | null, requestId: string | null = null) {
  const out = apply(state, { kind: CommandKind.JobSubmitted, at, jobType: 'create_machine', sentJobType: 'create_machine', paras: {}, requestId, lockKey });
  if (!out.ok) throw new Error(out.message);
  return out.value as { jobId: string; duplicate: boolean };
}

describe('machines', () => {
  it('refuses a second registration of the same host and type, and overlapping port ranges on one host', () => {
    const s = emptyMetaState();
    expect(apply(s, machine('127.0.2.1', 'storage', 57000, 57100)).ok).toBe(true);
    expect(apply(s, machine('127.0.2.1', 'storage', 58000, 58100))).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    expect(apply(s, machine('127.0.2.1', 'computer', 57050, 57200))).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    expect(apply(s, machine('127.0.2.1', 'computer', 57101, 57200)).ok).toBe(true);
  });

  it('set_machine moves every registration of the host; unknown hosts are NOT_FOUND', () => {
    const s = emptyMetaState();
    apply(s, machine('127.0.2.1', 'storage', 57000, 57100));
    apply(s, machine('127.0.2.1', 'computer', 57101, 57200));
    expect(apply(s, { kind: CommandKind.MachineStatusSet, at, hostaddr: '127.0.2.1', nodeStats: 'dead', reason: 'operator' })).toEqual({ ok: true, value: { changed: 2 } });
    expect(Object.values(s.machines).map((m) => m.nodeStats)).toEqual(['dead', 'dead']);
    expect(apply(s, { kind: CommandKind.MachineStatusSet, at, hostaddr: '127.0.2.9', nodeStats: 'dead', reason: 'operator' })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
  });

  it('sets a host\'s status by its records\' keys, without listing every machine (at 1,000 hosts a scan per health verdict or set_machine)', () => {
    const s = emptyMetaState();
    for (let i = 1; i <= 200; i++) apply(s, machine(`127.0.3.${i}`, 'storage', 57000, 57100));
    apply(s, machine('127.0.3.7', 'computer', 57101, 57200));
    let listed = 0;
    s.machines = new Proxy(s.machines, { ownKeys: (target) => (listed++, Reflect.ownKeys(target)) });
    expect(apply(s, { kind: CommandKind.MachineStatusSet, at, hostaddr: '127.0.3.7', nodeStats: 'dead', reason: 'health' })).toEqual({ ok: true, value: { changed: 2 } });
    expect(apply(s, { kind: CommandKind.MachineStatusSet, at, hostaddr: '127.0.3.250', nodeStats: 'dead', reason: 'health' })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    expect(listed).toBe(0);
    expect(s.machines['127.0.3.7/computer'].nodeStatsSetBy).toBe('health');
    expect(s.machines['127.0.3.8/storage'].nodeStats).toBe('running');
  });

  it('refuses to delete a machine that still has allocated ports', () => {
    const s = emptyMetaState();
    apply(s, machine('127.0.2.1', 'storage', 57000, 57100));
    const alloc = allocatePorts(s, { hostaddr: '127.0.2.1', machineType: 'storage', count: 1, owner: 'job:1' });
    expect(apply(s, { kind: CommandKind.MachineRemoved, at, hostaddr: '127.0.2.1', machineType: 'storage' })).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    releasePorts(s, '127.0.2.1', alloc.ok ? alloc.value : []);
    expect(apply(s, { kind: CommandKind.MachineRemoved, at, hostaddr: '127.0.2.1', machineType: 'storage' }).ok).toBe(true);
  });
});

describe('port allocator', () => {
  it('never hands out a port twice and reuses released ports', () => {
    const s = emptyMetaState();
    apply(s, machine('127.0.2.1', 'storage', 57000, 57009));
    const seen = new Set<number>();
    for (let i = 0; i < 5; i++) {
      const out = allocatePorts(s, { hostaddr: '127.0.2.1', machineType: 'storage', count: 2, owner: `job:${i}` });
      expect(out.ok).toBe(true);
      for (const p of out.ok ? out.value : []) {
        expect(seen.has(p)).toBe(false);
        seen.add(p);
      }
    }
    expect(allocatePorts(s, { hostaddr: '127.0.2.1', machineType: 'storage', count: 1, owner: 'x' })).toMatchObject({ ok: false, refusal: 'NO_RESOURCES' });
    releasePorts(s, '127.0.2.1', [57003]);
    expect(allocatePorts(s, { hostaddr: '127.0.2.1', machineType: 'storage', count: 1, owner: 'y' })).toEqual({ ok: true, value: [57003] });
  });
});

describe('retired command kinds', () => {
  it.each([
    [9, { hostaddr: '127.0.2.1', machineType: 'storage', count: 1, owner: 'job:1' }],
    [10, { hostaddr: '127.0.2.1', ports: [57000] }],
    [11, { hostaddr: '127.0.2.1', facts: { cores: 4, memoryMb: 2048, freeDiskBytes: {}, mariadbInstalled: true, postgresInstalled: true } }],
  ])('an old log entry of kind %i stops apply as an unknown kind and changes nothing', (kind, fields) => {
    const s = emptyMetaState();
    apply(s, machine('127.0.2.1', 'storage', 57000, 57100));
    expect(allocatePorts(s, { hostaddr: '127.0.2.1', machineType: 'storage', count: 1, owner: 'job:0' }).ok).toBe(true);
    const before = JSON.stringify(s);
    const retired = { kind, at, ...fields } as unknown as Command;
    expect(() => apply(s, retired)).toThrow(new UnknownCommandKindError(kind));
    expect(JSON.stringify(s)).toBe(before);
  });

  it('no live command kind reuses a retired number', () => {
    expect(Object.values(CommandKind).filter((k) => k >= 9 && k <= 11)).toEqual([]);
  });
});

describe('jobs', () => {
  it('the same request id returns the same job and never creates a second one', () => {
    const s = emptyMetaState();
    const first = submit(s, null, 'req-1');
    const again = submit(s, null, 'req-1');
    expect(again).toEqual({ jobId: first.jobId, duplicate: true });
    expect(Object.keys(s.jobs)).toHaveLength(1);
  });

  describe('a request id reused with a different body', () => {
    const setMachine = (requestId: string, paras: Record<string, unknown>, jobType = 'set_machine'): Command => ({
      kind: CommandKind.JobSubmitted, at, jobType, sentJobType: jobType, paras, requestId, requestDigest: requestDigest(jobType, paras), lockKey: null,
    });
    const running = { hostaddr: '127.0.2.1', node_stats: 'running' };
    const dead = { hostaddr: '127.0.2.1', node_stats: 'dead' };

    it('is CONFLICT and creates no job; the same body in another key order is a retry of the first job', () => {
      const s = emptyMetaState();
      expect(apply(s, setMachine('r', running))).toEqual({ ok: true, value: { jobId: '1', duplicate: false } });
      const conflict = apply(s, setMachine('r', dead));
      expect(conflict).toMatchObject({ ok: false, refusal: 'CONFLICT' });
      expect(conflict.ok ? '' : conflict.message).toMatch(/^request_id: r was already used for job 1 \(set_machine\) with a different body/);
      expect(apply(s, setMachine('r', running, 'delete_machine'))).toMatchObject({ ok: false, refusal: 'CONFLICT' });
      expect(apply(s, setMachine('r', { node_stats: 'running', hostaddr: '127.0.2.1' }))).toEqual({ ok: true, value: { jobId: '1', duplicate: true } });
      expect(Object.keys(s.jobs)).toEqual(['1']);
      expect(s.counters.job).toBe(1);
    });

    it('is told apart from a retry after a snapshot restore too', () => {
      const s = emptyMetaState();
      apply(s, setMachine('r', running));
      const restored = restoreMeta(snapshotMeta(s));
      expect(apply(restored, setMachine('r', running))).toEqual({ ok: true, value: { jobId: '1', duplicate: true } });
      expect(apply(restored, setMachine('r', dead))).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    });

    it('matches, as it always did, when the job or the entry is from before digests existed', () => {
      const s = emptyMetaState();
      apply(s, setMachine('r', running));
      const { requestDigest: _digest, ...oldEntry } = setMachine('r', dead) as JobSubmitted;
      expect(apply(s, oldEntry)).toEqual({ ok: true, value: { jobId: '1', duplicate: true } });
      delete s.jobs['1'].requestDigest;
      const restored = restoreMeta(snapshotMeta(s));
      expect(apply(restored, setMachine('r', dead))).toEqual({ ok: true, value: { jobId: '1', duplicate: true } });
    });
  });

  it('records a step output once; a repeated report keeps the first output', () => {
    const s = emptyMetaState();
    const { jobId } = submit(s, null);
    apply(s, { kind: CommandKind.JobStarted, at, jobId, stepNames: ['a', 'b'] });
    expect(apply(s, { kind: CommandKind.JobStepDone, at, jobId, step: 0, output: { n: 1 } })).toEqual({ ok: true, value: { output: { n: 1 }, duplicate: false } });
    expect(apply(s, { kind: CommandKind.JobStepDone, at, jobId, step: 0, output: { n: 2 } })).toEqual({ ok: true, value: { output: { n: 1 }, duplicate: true } });
    expect(apply(s, { kind: CommandKind.JobStepDone, at, jobId, step: 5, output: null })).toMatchObject({ ok: false, refusal: 'INVALID_PARAS' });
    apply(s, { kind: CommandKind.JobFinished, at, jobId, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
    expect(s.jobs[jobId].status).toBe('done');
    expect(apply(s, { kind: CommandKind.JobStepDone, at, jobId, step: 1, output: null })).toMatchObject({ ok: false, refusal: 'CONFLICT' });
  });

  it('jobs sharing a lock key run one at a time in submission order; others run freely', () => {
    const s = emptyMetaState();
    const a = submit(s, 'cluster:1').jobId;
    const b = submit(s, 'cluster:1').jobId;
    const c = submit(s, 'cluster:2').jobId;
    const d = submit(s, null).jobId;
    expect(runnableJobs(s).map((j) => j.id)).toEqual([a, c, d]);
    apply(s, { kind: CommandKind.JobFinished, at, jobId: a, outcome: { ok: false, errorCode: 1, errorInfo: 'x', attachment: null } });
    expect(runnableJobs(s).map((j) => j.id)).toEqual([b, c, d]);
  });

  it('a job finished out of its turn leaves its queue; nothing is left queued once all have ended', () => {
    const s = emptyMetaState();
    const finish = (jobId: string) => apply(s, { kind: CommandKind.JobFinished, at, jobId, outcome: { ok: false, errorCode: 1, errorInfo: 'x', attachment: null } });
    const [a, b, c] = [submit(s, 'cluster:1').jobId, submit(s, 'cluster:1').jobId, submit(s, 'cluster:1').jobId];
    const d = submit(s, null).jobId;
    finish(b);
    expect(s.runQueues['cluster:1']).toEqual([a, c]);
    finish(a);
    expect(runnableJobs(s).map((j) => j.id)).toEqual([c, d]);
    finish(c);
    finish(d);
    finish(d); // a repeated finish changes nothing
    expect(s.runQueues).toEqual({});
  });
});

describe('the kept job history', () => {
  let clock = at;
  const finish = (s: MetaState, jobId: string, keepFinished?: number) =>
    apply(s, { kind: CommandKind.JobFinished, at: ++clock, jobId, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} }, keepFinished });

  it('drops the oldest finished jobs beyond keepFinished, with their request ids; unfinished jobs stay', () => {
    const s = emptyMetaState();
    const [a, b, c, d] = ['ra', 'rb', 'rc', 'rd'].map((r) => submit(s, null, r).jobId);
    finish(s, b, 2);
    finish(s, a, 2);
    expect(Object.keys(s.jobs)).toEqual([a, b, c, d]);
    finish(s, d, 2); // b finished first: it goes
    expect(Object.keys(s.jobs)).toEqual([a, c, d]);
    expect(s.finishedJobs).toEqual([a, d]);
    expect(s.requestIds).toEqual({ ra: a, rc: c, rd: d });
    // The dropped job's request id is free again: the retried request is a new job.
    expect(submit(s, null, 'rb')).toEqual({ jobId: '5', duplicate: false });
    expect(s.jobs[c].status).toBe('started');
  });

  it('orders the kept finished jobs by finish time, so a finish stamped earlier by a new leader is dropped first', () => {
    const s = emptyMetaState();
    const [a, b, c] = [submit(s, null).jobId, submit(s, null).jobId, submit(s, null).jobId];
    const finishAt = (jobId: string, when: number) => apply(s, { kind: CommandKind.JobFinished, at: when, jobId, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} }, keepFinished: 2 });
    finishAt(a, 100);
    finishAt(b, 90); // applied later, stamped earlier
    expect(s.finishedJobs).toEqual([b, a]);
    finishAt(c, 110);
    expect(Object.keys(s.jobs)).toEqual([a, c]);
    expect(s.finishedJobs).toEqual(rebuildFinishedJobs(s));
  });

  it('a JobFinished written before the limit existed drops nothing; a repeated one changes nothing', () => {
    const s = emptyMetaState();
    const ids = [submit(s, null).jobId, submit(s, null).jobId, submit(s, null).jobId];
    for (const id of ids) finish(s, id);
    expect(Object.keys(s.jobs)).toEqual(ids);
    finish(s, ids[0], 1);
    expect(Object.keys(s.jobs)).toEqual(ids);
  });
});

describe('jobs started by their submission', () => {
  const submitWithSteps = (state: MetaState, lockKey: string | null) => {
    const out = apply(state, { kind: CommandKind.JobSubmitted, at, jobType: 'create_machine', sentJobType: 'create_machine', paras: {}, requestId: null, lockKey, stepNames: ['a', 'b'] });
    if (!out.ok) throw new Error(out.message);
    return (out.value as { jobId: string }).jobId;
  };

  it('a submission that names its steps starts the job in the same commit when its lock key is free', () => {
    const s = emptyMetaState();
    const free = submitWithSteps(s, 'machine:127.0.2.1');
    const keyless = submitWithSteps(s, null);
    expect(s.jobs[free]).toMatchObject({ status: 'ongoing', stepNames: ['a', 'b'] });
    expect(s.jobs[keyless]).toMatchObject({ status: 'ongoing', stepNames: ['a', 'b'] });
  });

  it('a submission queued behind an unfinished job with its lock key waits in started until JobStarted', () => {
    const s = emptyMetaState();
    const first = submitWithSteps(s, 'cluster:1');
    const queued = submitWithSteps(s, 'cluster:1');
    expect(s.jobs[queued]).toMatchObject({ status: 'started', stepNames: [] });
    expect(runnableJobs(s).map((j) => j.id)).toEqual([first]);
    apply(s, { kind: CommandKind.JobFinished, at, jobId: first, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
    expect(runnableJobs(s).map((j) => j.id)).toEqual([queued]);
    expect(s.jobs[queued].status).toBe('started');
    expect(submitWithSteps(s, 'cluster:1')).not.toBe(queued); // still held by the queued job
    expect(s.jobs[String(Number(queued) + 1)].status).toBe('started');
  });

  it('a submission without step names (an entry written before) waits in started as it always did', () => {
    const s = emptyMetaState();
    const { jobId } = submit(s, null);
    expect(s.jobs[jobId]).toMatchObject({ status: 'started', stepNames: [] });
  });
});

describe('command batches (several commands in one log entry)', () => {
  const submission = (requestId: string | null): Command => ({ kind: CommandKind.JobSubmitted, at, jobType: 'create_machine', sentJobType: 'create_machine', paras: {}, requestId, lockKey: null });

  it('apply in order exactly as consecutive entries would, each command with its own outcome', () => {
    const commands = [machine('127.0.0.1', 'storage', 100, 200), submission('r1'), submission('r1'), machine('127.0.0.1', 'storage', 300, 400), submission(null)];
    const one = emptyMetaState();
    const applied: Command[] = [];
    const outcomes = applyLogged(one, decodeCommand(encodeCommands(at, commands.map((c) => JSON.stringify(c)))), (cmd) => applied.push(cmd));

    const consecutive = emptyMetaState();
    expect(outcomes).toEqual(commands.map((c) => apply(consecutive, c)));
    expect(one).toEqual(consecutive);
    expect(applied.map((c) => c.kind)).toEqual(commands.map((c) => c.kind));
    // The same request id twice in one batch is still one job; the second registration of the host is refused.
    expect(outcomes).toMatchObject([{ ok: true }, { ok: true, value: { jobId: '1', duplicate: false } }, { ok: true, value: { jobId: '1', duplicate: true } }, { ok: false, refusal: 'CONFLICT' }, { ok: true, value: { jobId: '2' } }]);
  });

  it('a batch nested in a batch stops apply as an unknown kind, on every member alike', () => {
    const inner = { kind: CommandKind.CommandBatch, at, commands: [submission(null)] } as unknown as Command;
    const nested = decodeCommand(encodeCommand({ kind: CommandKind.CommandBatch, at, commands: [inner] }));
    const s = emptyMetaState();
    expect(() => applyLogged(s, nested)).toThrow(new UnknownCommandKindError(CommandKind.CommandBatch));
    expect(s.jobs).toEqual({});
  });
});

describe('snapshot', () => {
  it('an image from before the run queues existed restores with the unfinished jobs queued by lock key', () => {
    const s = emptyMetaState();
    const a = submit(s, null).jobId;
    const b = submit(s, 'cluster:1').jobId;
    const c = submit(s, 'cluster:1').jobId;
    const d = submit(s, null).jobId;
    apply(s, { kind: CommandKind.JobFinished, at, jobId: a, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
    // Earlier images carried a flat list of the unfinished ids instead.
    const { runQueues: _dropped, ...older } = { ...(JSON.parse(JSON.stringify(s)) as MetaState), openJobs: { [b]: true, [c]: true, [d]: true } };
    const restored = restoreMeta(new TextEncoder().encode(JSON.stringify({ format: 1, state: older })));
    expect(restored).toEqual(s);
    expect(runnableJobs(restored).map((j) => j.id)).toEqual([b, d]);
  });

  it('an image from before the finished-job list existed restores it in the order the jobs finished', () => {
    const s = emptyMetaState();
    const [a, b, c] = [submit(s, null).jobId, submit(s, null).jobId, submit(s, null).jobId];
    for (const [id, when] of [[c, 10], [a, 20], [b, 20]] as const) apply(s, { kind: CommandKind.JobFinished, at: when, jobId: id, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
    const { finishedJobs: _dropped, ...older } = JSON.parse(JSON.stringify(s)) as MetaState;
    const restored = restoreMeta(new TextEncoder().encode(JSON.stringify({ format: 1, state: older })));
    expect(restored.finishedJobs).toEqual([c, a, b]);
    expect(restored).toEqual(s);
  });

  it('round-trips the whole state, and the restored state applies the next command identically', () => {
    const s = emptyMetaState();
    apply(s, machine('127.0.2.1', 'storage', 57000, 57100));
    allocatePorts(s, { hostaddr: '127.0.2.1', machineType: 'storage', count: 3, owner: 'job:1' });
    submit(s, 'cluster:1', 'req-9');
    const restored = restoreMeta(snapshotMeta(s));
    expect(restored).toEqual(JSON.parse(JSON.stringify(s)));
    // Refused because of the ports taken before the snapshot: the restored state must know them.
    const next: Command = { kind: CommandKind.MachineRemoved, at, hostaddr: '127.0.2.1', machineType: 'storage' };
    expect(apply(restored, next)).toEqual(apply(s, next));
    expect(apply(restored, next)).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    expect(submit(restored, null, 'req-9').duplicate).toBe(true);
  });
});

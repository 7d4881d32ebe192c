// The agent's supervisor against a fake engine and a fake clock: what it restarts, what it
// must leave alone, and how it backs off.

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '@kcm/common';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DesiredStates } from '../../src/capabilities/desired-state';
import { InstanceSupervisor, type SupervisedEngine } from '../../src/capabilities/supervisor';

class FakeEngine implements SupervisedEngine {
  readonly kind = 'mariadb' as const;
  readonly pids = new Map<number, number>();
  starts: number[] = [];
  failStarts = 0;
  blocker = '';
  private nextPid = 1000;
  private tail: Promise<unknown> = Promise.resolve();

  exclusive<T>(_port: number, work: () => Promise<T>): Promise<T> {
    const next = this.tail.catch(() => {}).then(work);
    this.tail = next;
    return next;
  }
  async runningPid(port: number) {
    return this.pids.get(port) ?? 0;
  }
  async startBlocker() {
    return this.blocker;
  }
  async start(port: number) {
    this.starts.push(port);
    if (this.failStarts > 0) {
      this.failStarts--;
      throw new Error('shared memory still in use');
    }
    const pid = this.nextPid++;
    this.pids.set(port, pid);
    return pid;
  }
  crash(port: number) {
    this.pids.delete(port);
  }
}

describe('the agent supervisor', () => {
  let dir: string;
  let clock: number;
  let engine: FakeEngine;
  let desired: DesiredStates;
  let supervisor: InstanceSupervisor;
  const make = () => {
    const s = new InstanceSupervisor({ desired, logger: silentLogger(), now: () => clock, initialBackoffMs: 1000, maxBackoffMs: 8000, stableMs: 60_000 });
    s.register(engine);
    return s;
  };
  const pass = async () => {
    await supervisor.checkAll();
    await supervisor.idle();
  };

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-supervisor-'));
    clock = 1_000_000;
    engine = new FakeEngine();
    desired = new DesiredStates(dir);
    supervisor = make();
  });
  afterEach(async () => {
    await supervisor.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('restarts an instance wanted running whose process is gone, and counts the restart', async () => {
    engine.pids.set(57001, 10);
    await desired.set('mariadb', 57001, 'running');
    await pass();
    expect(engine.starts).toEqual([]);
    engine.crash(57001);
    await pass();
    expect(engine.starts).toEqual([57001]);
    expect(await supervisor.restarts('mariadb', 57001)).toEqual({ restarts: 1, desired: 'running', lastRestartAtMs: expect.any(Number) });
    expect((await supervisor.restarts('mariadb', 57001)).lastRestartAtMs).toBeGreaterThan(0);
  });

  it('reports each instance as its process is now (the census behind /metrics), not as its record wants it', async () => {
    engine.pids.set(57001, 10);
    await desired.set('mariadb', 57001, 'running');
    await desired.set('mariadb', 57002, 'running');
    await desired.set('mariadb', 57003, 'stopped');
    const byPort = async () => Object.fromEntries((await supervisor.census()).map((i) => [i.port, [i.desired, i.running, i.restarts]]));
    expect(await byPort()).toEqual({ 57001: ['running', true, 0], 57002: ['running', false, 0], 57003: ['stopped', false, 0] });
    await pass(); // 57002 is started again
    expect(await byPort()).toEqual({ 57001: ['running', true, 0], 57002: ['running', true, 1], 57003: ['stopped', false, 0] });
  });

  it('brings back after an agent restart what the previous agent was told to keep running', async () => {
    await desired.set('mariadb', 57001, 'running');
    await desired.set('mariadb', 57002, 'running');
    await supervisor.stop();
    supervisor = make(); // a new agent process reads the same state directory
    await pass();
    expect(engine.starts.sort()).toEqual([57001, 57002]);
  });

  it('leaves alone an instance an explicit Stop stopped, and one nobody asked it to keep', async () => {
    await desired.set('mariadb', 57001, 'running');
    await desired.set('mariadb', 57001, 'stopped');
    await pass();
    expect(engine.starts).toEqual([]);
    expect(await supervisor.restarts('mariadb', 57001)).toEqual({ restarts: 0, desired: 'stopped', lastRestartAtMs: 0 });
  });

  it('does not resurrect an instance that Remove forgets while a restart waits for the lock', async () => {
    await desired.set('mariadb', 57001, 'running');
    let release!: () => void;
    // Remove holds the instance's lock: it forgets the desired state, then deletes the instance.
    const remove = engine.exclusive(57001, async () => {
      await new Promise<void>((r) => (release = r));
      await desired.drop('mariadb', 57001);
    });
    await supervisor.checkAll(); // queues a restart behind Remove
    release();
    await remove;
    await supervisor.idle();
    expect(engine.starts).toEqual([]);
  });

  it('does not start an instance whose data is being replaced, and starts it once that is done', async () => {
    await desired.set('mariadb', 57001, 'running');
    engine.blocker = 'its data directory is not initialised';
    await pass();
    expect(engine.starts).toEqual([]);
    engine.blocker = '';
    clock += 1000;
    await pass();
    expect(engine.starts).toEqual([57001]);
  });

  it('backs off a crash loop: immediate first restart, then 1 s, 2 s, 4 s; staying up resets it', async () => {
    await desired.set('mariadb', 57001, 'running');
    await pass();
    expect(engine.starts.length).toBe(1);
    const waits: number[] = [];
    for (let crash = 0; crash < 3; crash++) {
      engine.crash(57001);
      const before = engine.starts.length;
      let waited = 0;
      await pass();
      while (engine.starts.length === before) {
        clock += 250;
        waited += 250;
        await pass();
      }
      waits.push(waited);
    }
    expect(waits).toEqual([1000, 2000, 4000]);
    clock += 60_000; // up for a minute
    await pass();
    engine.crash(57001);
    const before = engine.starts.length;
    await pass();
    expect(engine.starts.length).toBe(before + 1);
  });

  it('retries a start that failed, with backoff, until it succeeds', async () => {
    await desired.set('mariadb', 57001, 'running');
    engine.failStarts = 2;
    await pass();
    expect(engine.starts.length).toBe(1);
    await pass();
    expect(engine.starts.length).toBe(1); // waiting 1 s
    clock += 1000;
    await pass();
    expect(engine.starts.length).toBe(2);
    clock += 2000;
    await pass();
    expect(engine.starts.length).toBe(3);
    expect(await engine.runningPid(57001)).toBeGreaterThan(0);
    expect((await supervisor.restarts('mariadb', 57001)).restarts).toBe(1);
  });
});

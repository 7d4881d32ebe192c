import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { AgentCallError, AgentClient, AgentUnreachableError, CgroupAgentClient, MariaDbAgentClient, PostgresAgentClient, catalogErrorOf } from '@kcm/agent-api';
import { startAgent, type RunningAgent } from '../src/index';

describe('agent over gRPC', () => {
  let agent: RunningAgent;
  let client: AgentClient;
  let tmp: string;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-agent-'));
    agent = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'agent-state') });
    client = new AgentClient(agent.address);
  });

  afterAll(async () => {
    client.close();
    await agent.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('answers health with its address and pid', async () => {
    const health = await client.health();
    expect(health.hostaddr).toBe('127.0.0.1');
    expect(health.pid).toBe(process.pid);
  });

  it('beats on a Watch stream at once and then every interval, until the caller stops listening', async () => {
    const beats: number[] = [];
    const stop = new AbortController();
    const watching = client.watch(150, (reply) => {
      expect(reply.pid).toBe(process.pid);
      beats.push(Date.now());
      if (beats.length === 4) stop.abort();
    }, stop.signal);
    await watching; // resolves: ended by the caller, not a failure
    expect(beats).toHaveLength(4);
    // Three intervals of 150 ms after the first beat (a late first beat may shorten one gap).
    expect(beats[3] - beats[0]).toBeGreaterThanOrEqual(300);
    await new Promise((r) => setTimeout(r, 400));
    expect(beats).toHaveLength(4); // nothing after the stop
  });

  it('a Watch that asks for a beat interval below 100 ms gets 100 ms (a caller cannot make the agent spin)', async () => {
    const beats: number[] = [];
    const stop = new AbortController();
    const watching = client.watch(1, () => beats.push(Date.now()), stop.signal);
    await new Promise((r) => setTimeout(r, 450));
    stop.abort();
    await watching;
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(beats.length).toBeLessThanOrEqual(6); // at 1 ms it would be hundreds
  });

  it('reports host facts measured on this machine', async () => {
    const facts = await client.hostFacts([tmp, path.join(tmp, 'not/yet/created')]);
    expect(facts.cores).toBe(os.availableParallelism());
    expect(facts.memory_mb).toBe(Math.floor(os.totalmem() / 2 ** 20));
    expect(facts.disks).toHaveLength(2);
    for (const d of facts.disks) expect(d.free_bytes).toBeGreaterThan(0);
    expect(typeof facts.mariadb_installed).toBe('boolean');
  });

  it('creates directories and names the ones it cannot use', async () => {
    const good = path.join(tmp, 'data/a');
    const aFile = path.join(tmp, 'plain-file');
    await writeFile(aFile, 'x');
    const underAFile = path.join(aFile, 'sub');
    const reply = await client.prepareDirs('op-1', [good, 'relative/dir', underAFile]);
    expect(reply.problems).toEqual([
      { dir: 'relative/dir', reason: 'must be an absolute path' },
      { dir: underAFile, reason: 'ENOTDIR' },
    ]);
    expect((await stat(good)).isDirectory()).toBe(true);
  });

  it('an agent that is not there is a clear AgentUnreachableError', async () => {
    const nobody = new AgentClient('127.0.0.1:1', 1000);
    await expect(nobody.health()).rejects.toBeInstanceOf(AgentUnreachableError);
    await expect(nobody.watch(1000, () => {}, new AbortController().signal)).rejects.toBeInstanceOf(AgentUnreachableError);
    nobody.close();
  });

  it('answers a failed command with the status of its kind, which the manager maps to one catalog error', async () => {
    const mariadb = new MariaDbAgentClient(agent.address);
    const postgres = new PostgresAgentClient(agent.address);
    const cgroup = new CgroupAgentClient(agent.address);
    const failureOf = (call: Promise<unknown>) =>
      call.then(
        () => 'succeeded',
        (err: unknown) => ({ error: err instanceof AgentCallError ? 'AgentCallError' : String(err), catalog: catalogErrorOf(err) }),
      );
    try {
      // A request the agent refuses to act on: bad port, bad mode.
      expect(await failureOf(mariadb.start('op-start', 80))).toEqual({ error: 'AgentCallError', catalog: 'INVALID_PARAS' });
      expect(await failureOf(cgroup.setCpuLimit('op-cpu', { port: 5000, kind: 'mysql', cpuCores: 1, mode: 'burst' as 'quota' }))).toEqual({
        error: 'AgentCallError',
        catalog: 'INVALID_PARAS',
      });
      // An instance this agent never installed.
      expect(await failureOf(mariadb.start('op-start-2', 45_001))).toEqual({ error: 'AgentCallError', catalog: 'NOT_FOUND' });
      expect(await failureOf(postgres.start('op-start-3', 45_002))).toEqual({ error: 'AgentCallError', catalog: 'NOT_FOUND' });
    } finally {
      for (const c of [mariadb, postgres, cgroup]) c.close();
    }
  });

  it('an unreachable agent maps to AGENT_UNREACHABLE', async () => {
    const nobody = new MariaDbAgentClient('127.0.0.1:1', { queryMs: 1000 });
    const err = await nobody.probe(5000).catch((e: unknown) => e);
    expect(catalogErrorOf(err)).toBe('AGENT_UNREACHABLE');
    // However deep a job wraps it.
    expect(catalogErrorOf(new Error('installing node 3', { cause: new Error('step', { cause: err }) }))).toBe('AGENT_UNREACHABLE');
    nobody.close();
  });
});

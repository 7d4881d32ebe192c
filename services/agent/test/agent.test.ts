import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { AgentClient, AgentUnreachableError } from '@kcm/agent-api';
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
    nobody.close();
  });
});

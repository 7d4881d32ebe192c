import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { startAgent, type RunningAgent } from '../../src/index';
import { receiveBackup } from '../../src/capabilities/mariadb/backup/backup-stream';
import { systemMariaDbEngine } from '../../src/capabilities/engines/engine-paths';
import { MariaDbAgentClient } from '@kcm/agent-api';

describe('backup streams and commands that cannot be served', () => {
  let tmp: string;
  let agent: RunningAgent;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-mariadb-stream-'));
    agent = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'state') });
  });

  afterAll(async () => {
    await agent.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('a stream of an instance the source agent does not have fails with the reason, extracting nothing', async () => {
    const staging = path.join(tmp, 'staging');
    await mkdir(staging);
    const source = { agent_address: agent.address, hostaddr: '127.0.0.1', port: 57999, is_master: false };
    await expect(receiveBackup(source, 0, staging, systemMariaDbEngine().mbstream)).rejects.toThrow(/copy from 127.0.0.1:57999 failed: .*no MariaDB instance on port 57999/);
    expect(await readdir(staging)).toEqual([]);
  });

  it('a source agent that is not there fails the copy instead of hanging', async () => {
    const source = { agent_address: '127.0.0.1:1', hostaddr: '127.0.0.1', port: 57999, is_master: false };
    await expect(receiveBackup(source, 0, tmp, systemMariaDbEngine().mbstream)).rejects.toThrow(/copy from 127.0.0.1:57999 failed/);
  });

  it('commands on a port with no instance say so; a probe calls it unknown', async () => {
    const client = new MariaDbAgentClient(agent.address);
    await expect(client.start('start-x', 57999)).rejects.toThrow(/no MariaDB instance on port 57999/);
    expect((await client.probe(57999)).state).toBe('unknown');
    expect(await client.remove('remove-x', 57999)).toMatchObject({ state: 'removed' });
    await expect(client.install({ op_id: 'bad', spec: { port: 80 } as never, admin: { user: 'a', password: 'b' }, replication: { user: 'a', password: 'b' }, storage: { user: 'a', password: 'b' }, storage_db_patterns: [] })).rejects.toThrow(/port 80 must be 1024-65535/);
    client.close();
  });
});

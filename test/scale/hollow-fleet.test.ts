// The HOLLOW fleet simulator (bench/scale/hollow-agents.ts) itself: one process serving 200
// simulated hosts' agent endpoints over mutual TLS. It answers health and host facts and
// records instance commands WITHOUT starting any engine; this file checks only that, and
// no test that claims a job works on real engines may use the simulator.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { AgentClient, HostProbeAgentClient, MariaDbAgentClient } from '@kcm/agent-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hollowHosts } from '../../bench/scale/hollow-agents';
import { waitFor } from '../manager/helpers/processes';
import { testCertNamed, useTestTls } from '../helpers/pki';

const HOSTS = hollowHosts('127.50.0.1', 200);
const PORT = 58190;
const dir = mkdtempSync(join(tmpdir(), 'kcm-hollow-fleet-'));
const recordFile = join(dir, 'commands.jsonl');
const silentFile = join(dir, 'silent');
let fleet: ChildProcess;

beforeAll(async () => {
  useTestTls(['127.0.0.1'], 'manager');
  const tls = testCertNamed('agent', 'hollow-fleet-test-agent', HOSTS);
  fleet = spawn(
    process.execPath,
    ['--import', 'tsx', 'bench/scale/hollow-agents.ts', '--first', HOSTS[0], '--count', String(HOSTS.length), '--port', String(PORT),
      '--tls-ca', tls.ca, '--tls-cert', tls.cert, '--tls-key', tls.key, '--record', recordFile, '--silent-file', silentFile],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: fleet.stdout! });
  for await (const line of lines) if (line.includes('"ready":true')) break;
}, 60_000);

afterAll(() => {
  fleet?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

describe('the hollow fleet (control-plane simulator, no engines)', () => {
  it('answers Health for every simulated host over mutual TLS, each as its own host', async () => {
    const replies = await Promise.all(
      HOSTS.map(async (h) => {
        const client = new AgentClient(`${h}:${PORT}`);
        try {
          return await client.health();
        } finally {
          client.close();
        }
      }),
    );
    expect(replies.map((r) => r.hostaddr)).toEqual(HOSTS);
    expect(new Set(replies.map((r) => r.version))).toEqual(new Set(['hollow']));
  });

  it('reports host facts for the directories asked about', async () => {
    const client = new AgentClient(`${HOSTS[7]}:${PORT}`);
    const facts = await client.hostFacts(['/data/a', '/data/b']);
    client.close();
    expect(facts).toMatchObject({ cores: 16, mariadb_installed: true, postgres_installed: true });
    expect(facts.disks.map((d) => d.dir)).toEqual(['/data/a', '/data/b']);
  });

  it('records an instance command instead of running it', async () => {
    const client = new MariaDbAgentClient(`${HOSTS[42]}:${PORT}`);
    await client.start('op-hollow-1', 6001);
    client.close();
    const recorded = readFileSync(recordFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(recorded).toContainEqual({ hostaddr: HOSTS[42], method: 'MariaDbAgent.Start', request: expect.objectContaining({ op_id: 'op-hollow-1', port: 6001 }) });
  });

  it('answers ProbeHost with a fixed healthy reply for every port asked about (no instance exists to measure)', async () => {
    const client = new HostProbeAgentClient(`${HOSTS[9]}:${PORT}`);
    const reply = await client.probeHost({ mariadb_ports: [6001, 6002], postgres_ports: [7001] });
    client.close();
    expect(reply.mariadb.map((m) => [m.port, m.probe?.state, m.error])).toEqual([[6001, 'online', ''], [6002, 'online', '']]);
    expect(reply.postgres.map((p) => [p.port, p.probe?.running && p.probe.accepting])).toEqual([[7001, true]]);
  });

  it('a silenced host stops answering, as an unreachable agent would; its neighbours go on answering', async () => {
    const silenced = new AgentClient(`${HOSTS[3]}:${PORT}`, 2_000);
    const neighbour = new AgentClient(`${HOSTS[4]}:${PORT}`, 2_000);
    try {
      await silenced.health(); // answers before it is silenced
      writeFileSync(silentFile, `${HOSTS[3]}\n`);
      fleet.kill('SIGUSR2');
      // The fleet reads the list when the signal arrives: wait for the host's first refusal.
      const refusal = await waitFor('the silenced host to stop answering', () => silenced.health().then(() => undefined, (err: Error) => err), 10_000, 50);
      expect(refusal.message).toMatch(/UNAVAILABLE|unreachable/i);
      await expect(silenced.health()).rejects.toThrow();
      expect((await neighbour.health()).hostaddr).toBe(HOSTS[4]);
    } finally {
      silenced.close();
      neighbour.close();
    }
  });
});

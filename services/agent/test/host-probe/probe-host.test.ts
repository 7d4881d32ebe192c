// ProbeHost on the agent: one entry per port asked about, each what the per-instance probe
// answers; a port whose probe fails carries that failure in its own entry and the others
// still answer. No engine here (no instance is installed): test/cluster/create-delete.test.ts
// compares ProbeHost with the per-instance probes on real MariaDB and PostgreSQL instances.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '@kcm/common';
import { afterAll, describe, expect, it } from 'vitest';
import type { AgentContext } from '../../src/capability';
import { probeHost } from '../../src/capabilities/host-probe/index';
import { InstanceRegistry } from '../../src/capabilities/postgres/layout';

const stateDir = mkdtempSync(path.join(os.tmpdir(), 'kcm-probe-host-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

const ctx = {
  hostaddr: '127.0.0.1',
  logger: silentLogger(),
  stateDir,
  supervisor: { restarts: async () => ({ restarts: 3, desired: 'running' }) },
} as unknown as AgentContext;

describe('ProbeHost on the agent', () => {
  it('answers every port in order; a failing probe is an error in its own entry only', async () => {
    const reply = await probeHost(ctx, new InstanceRegistry(path.join(stateDir, 'postgres')), { mariadb_ports: [57001, 80, 57002], postgres_ports: [57010, 1] });
    expect(reply.mariadb.map((m) => [m.port, m.probe?.state ?? null, m.probe?.supervisor_restarts ?? null])).toEqual([
      [57001, 'unknown', 3],
      [80, null, null],
      [57002, 'unknown', 3],
    ]);
    expect(reply.mariadb[1].error).toContain('port 80 must be 1024-65535');
    expect(reply.postgres[0]).toMatchObject({ port: 57010, error: '', probe: { installed: false, problem: 'not installed by this agent', desired_state: 'running' } });
    expect(reply.postgres[1].error).toContain('port 1 must be an integer');
  });

  it('measures at most `concurrency` instances at once, and answers within its budget: an instance not measured by then is an error entry', async () => {
    let open = 0;
    let maxOpen = 0;
    const slowPorts = new Set([57003]);
    const measure = async <R>(port: number, reply: R): Promise<R> => {
      maxOpen = Math.max(maxOpen, ++open);
      await new Promise((r) => setTimeout(r, slowPorts.has(port) ? 5_000 : 20));
      open--;
      return reply;
    };
    const probes = {
      mariadb: (port: number) => measure(port, { port, state: 'online' } as never),
      postgres: (port: number) => measure(port, { installed: true } as never),
    };
    const t0 = Date.now();
    const reply = await probeHost(ctx, new InstanceRegistry(stateDir), { mariadb_ports: [57001, 57002, 57003, 57004, 57005], postgres_ports: [57010] }, { concurrency: 2, budgetMs: 400, probes });
    expect(Date.now() - t0).toBeLessThan(1_500);
    expect(maxOpen).toBe(2);
    expect(reply.mariadb.map((m) => m.error || m.probe)).toEqual([
      { port: 57001, state: 'online' },
      { port: 57002, state: 'online' },
      'not measured within 400 ms',
      { port: 57004, state: 'online' },
      { port: 57005, state: 'online' },
    ]);
    expect(reply.postgres[0]).toEqual({ port: 57010, probe: { installed: true }, error: '' });
  });

  it('answers an empty request with nothing', async () => {
    expect(await probeHost(ctx, new InstanceRegistry(path.join(stateDir, 'postgres')), { mariadb_ports: [], postgres_ports: [] })).toEqual({ mariadb: [], postgres: [] });
  });
});

// What `kcm local up` tells a newcomer to run next: a create_cluster the local fleet takes as
// it is (test/local/local-lifecycle.test.ts runs exactly these paras against a real deployment).

import { describe, expect, it } from 'vitest';
import { LOCAL_CREATE_CLUSTER_PARAS } from '../../src/local/machines';
import { RECORD_VERSION, type DeploymentRecord } from '../../src/local/record';
import { tryLines } from '../../src/local/render';

const record = (url: string): DeploymentRecord => ({
  version: RECORD_VERSION, dir: '/d', startedAt: '2026-01-01T00:00:00.000Z', managerNet: '127.0.1', agentNet: '127.0.2', first: 1,
  managers: [{ index: 1, member: url.replace('https://', ''), url, pid: 101, argv: ['node'], log: '/d/m.log' }],
  agents: [{ index: 1, hostaddr: '127.0.2.1', port: 58100, stateDir: '/d/s', machineFile: '/d/agent-1/create_machine.json', pid: 202, argv: ['node'], log: '/d/a.log' }],
});

describe('kcm local up: what to try next', () => {
  it('prints a create_cluster command with the paras the local fleet takes, pointed at this deployment', () => {
    const lines = tryLines(record('https://127.0.1.201:58000'), '/elsewhere', '/');
    const create = lines.find((l) => l.includes('create_cluster'))!;
    expect(create).toBe(`  npx kcm emit create_cluster --paras '${JSON.stringify(LOCAL_CREATE_CLUSTER_PARAS)}' --wait --url https://127.0.1.201:58000`);
    expect(lines.join('\n')).not.toContain('create_machine');
  });
});

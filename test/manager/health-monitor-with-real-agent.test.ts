// The health monitor against a real agent server in this process: under test/, not
// services/manager, because services/manager never imports the agent.
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
// The manager's code imports only @kcm/agent-api; this test watches a real agent server.
import { startAgent } from '@kcm/agent';
import { AgentClient } from '@kcm/agent-api';
import { CommandKind, HealthMonitor } from '@kcm/manager';
import { LocalStore, until } from '../../services/manager/test/helpers/local-store';

const stateDir = () => path.join(mkdtempSync(path.join(os.tmpdir(), 'kcm-health-')), 'agent');

async function registered(store: LocalStore, hostaddr: string) {
  await store.propose({
    kind: CommandKind.MachineRegistered, at: 0, hostaddr, machineType: 'storage', portLow: 57000, portHigh: 57100, rackId: 'r',
    datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1, totalCpuCores: 1, facts: null,
  });
}

describe('health monitor', () => {
  it('marks a machine dead after its agent is silent for deadAfterMs, and running again when it answers', async () => {
    const first = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: stateDir() });
    const port = Number(first.address.split(':')[1]);
    const store = new LocalStore();
    await registered(store, '127.0.0.1');
    const monitor = new HealthMonitor({ store, withAgent: (_host, use) => use(new AgentClient(first.address, 300)), logger: silentLogger(), intervalMs: 50, deadAfterMs: 400 });
    monitor.start();
    await until(() => monitor.reachability('127.0.0.1')?.reachable === true);

    await first.stop();
    await until(() => store.s.machines['127.0.0.1/storage'].nodeStats === 'dead', 5000);
    const lastSeen = monitor.reachability('127.0.0.1')!.lastSeenMs!;
    expect(Date.now() - lastSeen).toBeGreaterThanOrEqual(400);
    expect(store.s.machines['127.0.0.1/storage'].nodeStatsSetBy).toBe('health');

    const second = await startAgent({ hostaddr: '127.0.0.1', port, logger: silentLogger(), stateDir: stateDir() });
    await until(() => store.s.machines['127.0.0.1/storage'].nodeStats === 'running', 5000);
    monitor.stop();
    await second.stop();
  });

  it('never revives a machine an operator set dead', async () => {
    const agent = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: stateDir() });
    const store = new LocalStore();
    await registered(store, '127.0.0.1');
    await store.propose({ kind: CommandKind.MachineStatusSet, at: 0, hostaddr: '127.0.0.1', nodeStats: 'dead', reason: 'operator' });
    const monitor = new HealthMonitor({ store, withAgent: (_host, use) => use(new AgentClient(agent.address, 300)), logger: silentLogger(), intervalMs: 20, deadAfterMs: 100 });
    await monitor.probeAll();
    await monitor.probeAll();
    expect(monitor.reachability('127.0.0.1')?.reachable).toBe(true);
    expect(store.s.machines['127.0.0.1/storage'].nodeStats).toBe('dead');
    await agent.stop();
  });
});

// set_machine's validation runs on every request the leader takes: it finds the host's
// records by key, never by listing every machine (at 1,000 hosts a scan per request).

import { describe, expect, it } from 'vitest';
import { setMachine } from '../../src/jobs/machines';
import { emptyMetaState, type MachineRecord } from '../../src/meta/state';

const record = (hostaddr: string, machineType: 'storage' | 'computer'): MachineRecord =>
  ({ hostaddr, machineType, portLow: 57000, portHigh: 57100, nodeStats: 'running', nodeStatsSetBy: 'operator', registeredAt: 0, facts: null }) as unknown as MachineRecord;

describe('set_machine validation', () => {
  it('accepts a registered host and refuses an unknown one without listing every machine', () => {
    const state = emptyMetaState();
    for (let i = 1; i <= 200; i++) state.machines[`127.0.4.${i}/storage`] = record(`127.0.4.${i}`, 'storage');
    state.machines['127.0.4.201/computer'] = record('127.0.4.201', 'computer');
    let listed = 0;
    state.machines = new Proxy(state.machines, { ownKeys: (target) => (listed++, Reflect.ownKeys(target)) });
    const validate = (hostaddr: string) => setMachine.validate!({ hostaddr, node_stats: 'dead' } as never, state);
    expect(() => validate('127.0.4.7')).not.toThrow();
    expect(() => validate('127.0.4.201')).not.toThrow();
    expect(() => validate('127.0.4.250')).toThrow(/not registered/);
    expect(listed).toBe(0);
  });
});

import { describe, expect, it } from 'vitest';
import { parseManagerConfig } from '../../../manager/src/config';
import { agentArgv, DEFAULT_TOPOLOGY, machineParas, managerArgv, managerConfig, planTopology, TopologyError } from '../../src/local/topology';
import { parseRequest } from '@kcm/protocol';

const plan = (overrides: Partial<typeof DEFAULT_TOPOLOGY> = {}) => planTopology({ ...DEFAULT_TOPOLOGY, dir: '/srv/kcm', ...overrides });

describe('local topology', () => {
  it('puts managers on 127.0.1.x and agents on 127.0.2.x, numbered from 1, by default', () => {
    const topology = plan();
    expect(topology.managers.map((m) => m.member)).toEqual(['127.0.1.1:58000', '127.0.1.2:58000', '127.0.1.3:58000']);
    expect(topology.managers.map((m) => m.url)).toEqual(['https://127.0.1.1:58000', 'https://127.0.1.2:58000', 'https://127.0.1.3:58000']);
    expect(topology.managers[0].ports).toEqual([58000, 58001]);
    expect(topology.agents.map((a) => `${a.hostaddr}:${a.port}`)).toEqual(['127.0.2.1:58100', '127.0.2.2:58100', '127.0.2.3:58100']);
    expect(topology.managers[1].configPath).toBe('/srv/kcm/manager-2/config.json');
    expect(topology.managers[1].logPath).toBe('/srv/kcm/manager-2/manager.log');
    expect(topology.agents[2].stateDir).toBe('/srv/kcm/agent-3/state');
    expect(topology.agents[2].logPath).toBe('/srv/kcm/agent-3/agent.log');
  });

  it('moves to another address block with --manager-net, --agent-net and --first', () => {
    const topology = plan({ managers: 1, hosts: 2, managerNet: '127.0.9', agentNet: '127.0.8', first: 201, httpPort: 59000, agentPort: 59100 });
    expect(topology.managers.map((m) => m.member)).toEqual(['127.0.9.201:59000']);
    expect(topology.managers[0].ports).toEqual([59000, 59001]);
    expect(topology.agents.map((a) => `${a.hostaddr}:${a.port}`)).toEqual(['127.0.8.201:59100', '127.0.8.202:59100']);
  });

  it('refuses options that cannot make a deployment', () => {
    expect(() => plan({ managers: 0 })).toThrow(TopologyError);
    expect(() => plan({ hosts: -1 })).toThrow(/--hosts/);
    expect(() => plan({ first: 253 })).toThrow(/past \.254/);
    expect(() => plan({ managerNet: '10.0.1' })).toThrow(/loopback/);
    expect(() => plan({ agentNet: '127.0' })).toThrow(/three octets/);
    expect(() => plan({ agentNet: '127.0.1' })).toThrow(/must differ/);
    expect(() => plan({ httpPort: 65535 })).toThrow(/--http-port/);
    expect(() => planTopology({ ...DEFAULT_TOPOLOGY, dir: 'relative/dir' })).toThrow(/absolute/);
  });

  it('writes manager configs that the manager itself accepts, all seeding the same group', () => {
    const topology = plan();
    const configs = topology.managers.map((m) => parseManagerConfig(managerConfig(topology, m, 'a'.repeat(64))));
    expect(configs.map((c) => c.member)).toEqual(topology.managers.map((m) => m.member));
    for (const config of configs) {
      expect(config.initialMembers).toEqual(['127.0.1.1:58000', '127.0.1.2:58000', '127.0.1.3:58000']);
      expect(config.join).toBe(false);
      expect(config.agentPort).toBe(58100);
      expect(config.machineDeadAfterMs).toBe(30_000);
      expect(config.healthIntervalMs).toBe(2_000);
    }
    expect(configs[2].dataDir).toBe('/srv/kcm/manager-3/data');
  });

  it('writes create_machine paras the gateway accepts, with every instance directory under the deployment', () => {
    const agent = plan().agents[1];
    const paras = machineParas(agent);
    const parsed = parseRequest({ version: '1.0', job_id: '', job_type: 'create_machine', timestamp: '0', user_name: 'local', paras });
    expect(parsed.ok).toBe(true);
    expect(paras.hostaddr).toBe('127.0.2.2');
    for (const key of ['datadir', 'logdir', 'wal_log_dir', 'comp_datadir'] as const) expect(paras[key].startsWith('/srv/kcm/agent-2/instances/')).toBe(true);
  });

  it('starts each service as a single node process with the tsx loader, so the recorded pid is the server', () => {
    const topology = plan();
    expect(managerArgv('/usr/bin/node', '/repo', topology.managers[0])).toEqual([
      '/usr/bin/node', '--import', 'tsx', '/repo/services/manager/src/main.ts', '--config', '/srv/kcm/manager-1/config.json',
    ]);
    expect(agentArgv('/usr/bin/node', '/repo', topology.agents[0])).toEqual([
      '/usr/bin/node', '--import', 'tsx', '/repo/services/agent/src/main.ts', '--host', '127.0.2.1', '--port', '58100', '--state-dir', '/srv/kcm/agent-1/state',
      '--tls-ca', '/srv/kcm/tls/ca.pem', '--tls-cert', '/srv/kcm/tls/certs/agent-1.pem', '--tls-key', '/srv/kcm/tls/certs/agent-1.key',
    ]);
  });

  it('gives every manager the shared CA and its own certificate, so the group runs with mutual TLS', () => {
    const topology = plan();
    const config = parseManagerConfig(managerConfig(topology, topology.managers[1], 'ab'.repeat(32)));
    expect(config.tls).toEqual({ ca: '/srv/kcm/tls/ca.pem', cert: '/srv/kcm/tls/certs/manager-2.pem', key: '/srv/kcm/tls/certs/manager-2.key' });
    expect(config.insecure).toBe(false);
  });
});

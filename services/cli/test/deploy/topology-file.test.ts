import { describe, expect, it } from 'vitest';
import { parseTopology, TopologyFileError } from '../../src/deploy/topology-file';

const GOOD = `name: prod
global:
  deploy_dir: ./kcm-prod
  packages_dir: /srv/dist
managers:
  - { host: 10.0.0.11 }
  - { host: 10.0.0.12 }
  - { host: 10.0.0.13 }
agents:
  - host: 10.0.0.21
    cores: 16
    memory_mb: 65536
`;

function errorOf(text: string): TopologyFileError {
  try {
    parseTopology(text, '/home/op');
  } catch (err) {
    if (err instanceof TopologyFileError) return err;
    throw err;
  }
  throw new Error('parsed without an error');
}

describe('topology file', () => {
  it('fills the defaults and resolves relative directories against the file\'s directory', () => {
    const t = parseTopology(GOOD, '/home/op');
    expect(t.global).toMatchObject({ deploy_dir: '/home/op/kcm-prod', packages_dir: '/srv/dist', transport: 'ssh', agent_port: 58100, plain_http: false });
    expect(t.managers[0]).toMatchObject({ host: '10.0.0.11', port: 58000, data_dir: '/var/lib/kcm/manager', join: false });
    expect(t.agents[0]).toMatchObject({ machine_types: ['storage', 'computer'], rack: '1', storage_port_range: '57000-58000', computer_port_range: '56000-56999' });
  });

  it('a misspelt key is refused naming it and its line, not ignored', () => {
    const e = errorOf(GOOD.replace('    cores: 16', '    cores: 16\n    rack_id: r1'));
    expect(e.key).toBe('agents[0].rack_id');
    expect(e.message).toBe('agents[0].rack_id (line 12): is not a topology key');
  });

  it('a missing key names the entry it is missing from', () => {
    expect(errorOf(GOOD.replace('    memory_mb: 65536\n', '')).message).toBe('agents[0].memory_mb (line 10): is required');
    expect(errorOf(GOOD.replace('  packages_dir: /srv/dist\n', '')).message).toBe('global.packages_dir (line 3): is required');
  });

  it('bad values name the key and say what is expected', () => {
    expect(errorOf(GOOD.replace('10.0.0.12', 'not a host!')).message).toMatch(/^managers\[1\]\.host \(line 7\): must be an IP address or a host name$/);
    expect(errorOf(GOOD.replace('machine', 'machine').replace('    cores: 16', '    cores: 16\n    machine_types: [storage, proxy]')).key).toBe('agents[0].machine_types[1]');
    expect(errorOf(GOOD.replace('  packages_dir: /srv/dist', '  packages_dir: /srv/dist\n  transport: scp')).key).toBe('global.transport');
    expect(errorOf(GOOD.replace('name: prod', 'name: Prod')).key).toBe('name');
  });

  it('cross-entry mistakes name the second entry', () => {
    expect(errorOf(GOOD.replace('10.0.0.12', '10.0.0.11')).message).toBe('managers[1].host (line 7): 10.0.0.11:58000 is already managers[0]');
    expect(errorOf(`${GOOD}  - { host: 10.0.0.21, cores: 2, memory_mb: 1024 }\n`).message).toMatch(/^agents\[1\]\.host .*is already agents\[0\]/);
    expect(errorOf(`${GOOD}  - { host: 10.0.0.22, port: 58200, cores: 2, memory_mb: 1024 }\n`).key).toBe('agents[1].port');
  });

  it('local-root needs a root per host, and ssh takes none', () => {
    expect(errorOf(GOOD.replace('  packages_dir: /srv/dist', '  packages_dir: /srv/dist\n  transport: local-root')).message).toMatch(/^managers\[0\]\.root.*is required with global\.transport local-root/);
    expect(errorOf(GOOD.replace('{ host: 10.0.0.11 }', '{ host: 10.0.0.11, root: /tmp/m1 }')).message).toMatch(/^managers\[0\]\.root.*only for global\.transport local-root/);
  });

  it('YAML that does not parse is one error with its line', () => {
    const e = errorOf('name: prod\nglobal: [\n');
    expect(e.key).toBe('(yaml)');
    expect(e.line).toBeGreaterThan(0);
  });
});

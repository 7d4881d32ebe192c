// install-host.ts against an in-memory host: what kcm deploy does on a first run, on a re-run
// (nothing), and when the topology changed under a running host (reported, not applied).

import { describe, expect, it } from 'vitest';
import type { Deployment } from '../../src/deploy/deployment';
import { planHosts, type Credentials, type HostDirectory, type HostFile } from '../../src/deploy/host-plan';
import { installHost, outcomeLines } from '../../src/deploy/install-host';
import type { DebPackage, InstalledUnits, PackageName } from '../../src/deploy/package-units';
import { parseUnitFile } from '../../src/deploy/systemd-unit';
import { parseTopology } from '../../src/deploy/topology-file';
import type { HostTransport, UnitToStart } from '../../src/deploy/transport';

const TOPOLOGY = `name: prod
global: { deploy_dir: /op/kcm-prod, packages_dir: /op/dist }
managers:
  - { host: 10.0.0.11 }
agents:
  - { host: 10.0.0.21, cores: 4, memory_mb: 8192, data_dir: /data/kcm }
`;

const credentials: Credentials = {
  caPem: Buffer.from('CA'),
  certificate: (role, host) => ({ cert: Buffer.from(`cert ${role} ${host}`), key: Buffer.from(`key ${role} ${host}`) }),
  secretsKey: Buffer.alloc(32, 7),
  adminTokenSha256: 'a'.repeat(64),
};

const units: InstalledUnits = {
  manager: { fileName: 'kcm-manager@.service', file: parseUnitFile(''), unitFor: (i) => `kcm-manager@${i}.service`, configFile: (i) => `/etc/kcm/manager-${i}.json` },
  agent: { fileName: 'kcm-agent.service', file: parseUnitFile(''), unitFor: () => 'kcm-agent.service', environmentFile: '/etc/kcm/agent.env' },
};

class MemoryHost implements HostTransport {
  readonly describe = 'memory';
  readonly files = new Map<string, HostFile>();
  readonly dirs: HostDirectory[] = [];
  readonly installed = new Map<string, string>();
  readonly running = new Set<string>();
  async installedVersion(pkg: DebPackage['name']) {
    return this.installed.get(pkg);
  }
  async install(pkg: DebPackage) {
    this.installed.set(pkg.name, pkg.version);
  }
  async readFile(file: string) {
    return this.files.get(file)?.content;
  }
  async makeDirectory(dir: HostDirectory) {
    this.dirs.push(dir);
  }
  async writeFile(file: HostFile) {
    this.files.set(file.path, file);
  }
  async isRunning(u: UnitToStart) {
    return this.running.has(u.unit.unitFor(u.instance));
  }
  async start(u: UnitToStart) {
    this.running.add(u.unit.unitFor(u.instance));
  }
  async stop(u: UnitToStart) {
    this.running.delete(u.unit.unitFor(u.instance));
  }
}

function deploymentOf(text: string): Deployment {
  const topology = parseTopology(text, '/op');
  const packages = new Map<PackageName, DebPackage>([
    ['kcm-manager', { name: 'kcm-manager', file: '/op/dist/kcm-manager_0.2.0_all.deb', version: '0.2.0' }],
    ['kcm-agent', { name: 'kcm-agent', file: '/op/dist/kcm-agent_0.2.0_amd64.deb', version: '0.2.0' }],
  ]);
  return { topologyFile: '/op/topology.yaml', topology, packages, units, plans: planHosts(topology, credentials, units), files: { dir: '/op/kcm-prod', caPem: '', adminToken: '', secretsKey: '' }, caPem: credentials.caPem, token: 't' };
}

describe('installing one host', () => {
  it('a new manager host gets the package, ca.pem, its certificate and key, the secrets key and its config, and is started; never the CA key', async () => {
    const deployment = deploymentOf(TOPOLOGY);
    const host = new MemoryHost();
    const outcome = await installHost(deployment, deployment.plans[0], host);
    expect(outcome.installed).toEqual(['kcm-manager 0.2.0']);
    expect(host.dirs).toEqual([{ path: '/var/lib/kcm/manager', mode: 0o700, owner: 'kcm' }]);
    expect(outcome.started).toEqual(['kcm-manager@m1.service']);
    expect([...host.files.keys()].sort()).toEqual(['/etc/kcm/manager-m1.json', '/etc/kcm/secrets.key', '/etc/kcm/tls/ca.pem', '/etc/kcm/tls/manager.key', '/etc/kcm/tls/manager.pem']);
    expect(host.files.get('/etc/kcm/tls/manager.key')).toMatchObject({ mode: 0o600, owner: 'kcm' });
    const config = JSON.parse(host.files.get('/etc/kcm/manager-m1.json')!.content.toString());
    expect(config).toMatchObject({ member: '10.0.0.11:58000', initialMembers: ['10.0.0.11:58000'], tokens: [{ name: 'prod-admin', role: 'admin', sha256: 'a'.repeat(64) }] });
    expect(config.plainHttp).toBeUndefined();
  });

  it('an agent host gets its data directory traversable, agent.env and its certificate', async () => {
    const deployment = deploymentOf(TOPOLOGY);
    const host = new MemoryHost();
    await installHost(deployment, deployment.plans[1], host);
    expect(host.dirs).toEqual([{ path: '/data/kcm', mode: 0o755, owner: 'root' }]);
    expect(host.files.get('/etc/kcm/agent.env')!.content.toString()).toContain('KCM_AGENT_HOST=10.0.0.21\nKCM_AGENT_PORT=58100\n');
    expect(deployment.plans[1].roles[0]).toMatchObject({ kind: 'agent', machines: [{ machine_type: 'storage', datadir: '/data/kcm/storage_datadir', total_cpu_cores: '4', total_mem: '8192' }, { machine_type: 'computer', port_range: '56000-56999' }] });
  });

  it('a re-run on a running host changes nothing and says it left the host alone', async () => {
    const deployment = deploymentOf(TOPOLOGY);
    const host = new MemoryHost();
    await installHost(deployment, deployment.plans[0], host);
    const again = await installHost(deployment, deployment.plans[0], host);
    expect(again).toMatchObject({ installed: [], written: [], changed: [], started: [], alreadyRunning: ['kcm-manager@m1.service'] });
    expect(outcomeLines(again)).toEqual(['10.0.0.11 (memory): installed and running (kcm-manager@m1.service): left alone']);
  });

  it('a config the topology now gives differently is reported on a running host and not written under it', async () => {
    const host = new MemoryHost();
    const first = deploymentOf(TOPOLOGY);
    await installHost(first, first.plans[0], host);
    const before = host.files.get('/etc/kcm/manager-m1.json')!.content;
    const changed = deploymentOf(TOPOLOGY.replace('{ host: 10.0.0.11 }', '{ host: 10.0.0.11, data_dir: /srv/kcm }'));
    const outcome = await installHost(changed, changed.plans[0], host);
    expect(outcome.changed).toEqual(['/etc/kcm/manager-m1.json']);
    expect(host.files.get('/etc/kcm/manager-m1.json')!.content).toEqual(before);
    expect(outcomeLines(outcome)[1]).toMatch(/^ {2}changed: \/etc\/kcm\/manager-m1\.json differs from what the topology gives; not applied while the host runs/);
  });

  it('a stopped host is brought back: missing files written, the unit started', async () => {
    const deployment = deploymentOf(TOPOLOGY);
    const host = new MemoryHost();
    await installHost(deployment, deployment.plans[0], host);
    host.running.clear();
    host.files.delete('/etc/kcm/secrets.key');
    const outcome = await installHost(deployment, deployment.plans[0], host);
    expect(outcome).toMatchObject({ installed: [], written: ['/etc/kcm/secrets.key'], started: ['kcm-manager@m1.service'] });
  });
});

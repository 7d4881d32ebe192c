// A real 3-member manager group (real manager processes, Raft over gRPC, LevelDB) holding
// the metadata of a HOLLOW fleet: its hosts are served by the fleet simulator
// (hollow-agents.ts), which answers health probes and host facts and runs no engine. For
// the control plane only (bench/scale/group.ts, test/scale/hollow-group.test.ts): no job
// that needs an engine can work here, and nothing here claims one does.
//
// Seeding as in production: a metadata backup image of the fleet's state (built with the
// bench-only loader of meta-state.ts) starts a brand-new group, every member with
// `kcm-manager --restore-meta <image>`, so each holds it through Raft from index 1.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { metadataBackupImage } from '@kcm/manager';
import { findLeader } from '../../test/helpers/emit-client';
import { MANAGER_MAIN, ManagedProcess, REPO_ROOT, waitFor } from '../../test/manager/helpers/processes';
import { managerTls, testCertNamed, testCertsPerHost, useTestTls } from '../../test/helpers/pki';
import { testSecretsKeyFile } from '../../test/helpers/secrets';
import { testTokenConfig } from '../../test/helpers/tokens';
import { hollowHosts } from './hollow-agents';
import { loadFleetStateDirectly } from './meta-state';

export interface HollowGroupOptions {
  dir: string;
  /** Manager HTTP addresses `<host>:<port>` (Raft on port + 1). */
  members: string[];
  firstHost: string;
  hosts: number;
  clusters: number;
  jobs: number;
  agentPort: number;
  /** Extra manager config (snapshotEntries, healthIntervalMs, ...). */
  managerConfig?: Record<string, unknown>;
  /** The hollow agents serve no HostProbeAgent (agents older than the manager). */
  olderAgents?: boolean;
  /**
   * A certificate per simulated host, as real agents have (the benches). Without it, one
   * certificate names every host: each manager handshake then parses the whole list, a cost
   * no real fleet has, but signing 1,000 certificates takes ~40 s of openssl runs.
   */
  certPerHost?: boolean;
}

/**
 * The loops that act on instances (reconciling, shard failure detection, binlog
 * archiving, rollback retries) would ask hollow hosts about engines that do not exist:
 * they run once an hour here. Health probing (machines) stays as configured.
 */
const NO_ENGINE_LOOPS = { reconcileIntervalMs: 3_600_000, failureDetectIntervalMs: 3_600_000, binlogArchiveIntervalMs: 3_600_000, rollbackRetryIntervalMs: 3_600_000 };

export class HollowGroup {
  readonly hosts: string[];
  readonly imageFile: string;
  fleet: ChildProcess | undefined;
  readonly managers = new Map<string, ManagedProcess>();
  private readonly configs = new Map<string, string>();

  constructor(readonly opts: HollowGroupOptions) {
    mkdirSync(opts.dir, { recursive: true });
    this.hosts = hollowHosts(opts.firstHost, opts.hosts);
    this.imageFile = path.join(opts.dir, 'seed.kcm-meta');
    useTestTls(['127.0.0.1']); // this process calls managers' gateways only, but the test PKI must exist
  }

  /** Writes the metadata backup image the group starts from; returns its size. */
  writeSeedImage(): number {
    const { hosts, clusters, jobs, firstHost } = this.opts;
    const state = loadFleetStateDirectly(hosts, clusters, jobs, firstHost);
    const image = metadataBackupImage(state, { backupJobId: 'hollow-seed', appliedIndex: 1, takenAt: Date.now() });
    writeFileSync(this.imageFile, image);
    return image.byteLength;
  }

  /** Starts the simulator on every host; resolves once every endpoint listens. */
  async startFleet(): Promise<void> {
    let tlsArgs: string[];
    if (this.opts.certPerHost) {
      const perHost = await testCertsPerHost('agent', this.hosts);
      tlsArgs = ['--tls-ca', perHost.ca, '--tls-dir', perHost.dir];
    } else {
      const shared = testCertNamed('agent', `hollow-group-${this.opts.firstHost}`, this.hosts);
      tlsArgs = ['--tls-ca', shared.ca, '--tls-cert', shared.cert, '--tls-key', shared.key];
    }
    const fleet = spawn(
      process.execPath,
      ['--import', 'tsx', 'bench/scale/hollow-agents.ts', '--first', this.opts.firstHost, '--count', String(this.hosts.length), '--port', String(this.opts.agentPort),
        ...tlsArgs, ...(this.opts.olderAgents ? ['--older-agents'] : [])],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    this.fleet = fleet;
    for await (const line of createInterface({ input: fleet.stdout! })) if (line.includes('"ready":true')) return;
    throw new Error('the hollow fleet exited before it was ready');
  }

  /** The member's log file (pino JSON lines). */
  logFile(member: string): string {
    return path.join(this.opts.dir, `manager-${this.opts.members.indexOf(member) + 1}`, 'manager.log');
  }

  /** The member's process; `seed` adds --restore-meta (only for its very first start). */
  private process(member: string, seed: boolean): ManagedProcess {
    const i = this.opts.members.indexOf(member);
    const dir = path.join(this.opts.dir, `manager-${i + 1}`);
    let config = this.configs.get(member);
    if (!config) {
      mkdirSync(dir, { recursive: true });
      config = path.join(dir, 'manager.json');
      writeFileSync(config, JSON.stringify({
        member, dataDir: path.join(dir, 'data'), initialMembers: this.opts.members, agentPort: this.opts.agentPort, logLevel: 'info',
        tokens: testTokenConfig(), secretsKeyFile: testSecretsKeyFile(), finishedJobsKept: Math.max(10_000, this.opts.jobs), ...NO_ENGINE_LOOPS,
        plainHttp: true, ...this.opts.managerConfig, ...managerTls(member),
      }, null, 2));
      this.configs.set(member, config);
    }
    const args = [MANAGER_MAIN, '--config', config, ...(seed ? ['--restore-meta', this.imageFile] : [])];
    return new ManagedProcess(`manager ${member}`, args, this.logFile(member));
  }

  /** First start of every member, each seeded from the image; resolves with the leader. */
  async startSeeded(timeoutMs: number): Promise<string> {
    for (const member of this.opts.members) {
      const p = this.process(member, true);
      this.managers.set(member, p);
      p.start();
    }
    return waitFor('a leader of the seeded group', () => findLeader(this.opts.members), timeoutMs, 250);
  }

  /** Starts a member again on its own data (after a kill). */
  restart(member: string): ManagedProcess {
    const p = this.process(member, false);
    this.managers.set(member, p);
    p.start();
    return p;
  }

  manager(member: string): ManagedProcess {
    const p = this.managers.get(member);
    if (!p) throw new Error(`no manager ${member}`);
    return p;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.managers.values()].map((p) => p.kill()));
    this.fleet?.kill('SIGTERM');
  }
}

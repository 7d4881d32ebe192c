// Free disk space that changes after create_machine, on real agents and engines (issue 35,
// defect 3). Each test host's datadir is a tmpfs whose size the test changes (a grown disk)
// or fills (a full one); one host's wal_log_dir is a tmpfs too small for a redo log. The
// leader's host-facts refresher (every 200 ms here) must carry each change into placement,
// and an install into a disk that is too small must fail naming it.

import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { emit, emitRaw, waitForJobEnd } from '../helpers/emit-client';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';

const run = promisify(execFile);
const MEMBER = '127.0.1.97:58197';
const AGENT_PORT = 58197;
const MB = 2 ** 20;
const GB = 2 ** 30;

const CREATE_PARAS = clusterParas({ nick_name: 'disks', computer_iplists: [] });

describe('host facts measured after create_machine: placement and installs on disks that changed', () => {
  let f: ClusterFixture;
  const mounts: string[] = [];
  const datadir = (i: number) => f.dirs(i).datadir;

  async function mountTmpfs(dir: string, size: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir]);
    mounts.push(dir);
  }

  /** The free bytes of host i's datadir as the metadata records them now. */
  const recordedFree = (i: number) => {
    const facts = f.manager.store.state().machines[`${HOSTS[i]}/storage`]?.facts;
    return facts && Object.hasOwn(facts.freeDiskBytes, datadir(i)) ? facts.freeDiskBytes[datadir(i)] : undefined;
  };

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER, managerConfig: { hostFactsIntervalMs: 200 } });
    for (let i = 0; i < HOSTS.length; i++) await mountTmpfs(datadir(i), '300m');
    // Ports of their own: the fixture's default ranges are those of every other cluster test.
    await registerMachines(f, { storagePorts: (i) => ({ low: 56500 + 20 * i, high: 56519 + 20 * i }), computerPorts: (i) => ({ low: 56600 + 10 * i, high: 56609 + 10 * i }) });
  });

  afterAll(async () => {
    // Detached first (lazily: an engine may still hold a file), so the fixture's cleanup removes plain directories.
    for (const dir of mounts.reverse()) await run('umount', ['-l', dir]).catch(() => {});
    await f?.close();
  });

  it('a datadir registered with 300 MB is refused, and takes the cluster once grown to 1.1 GB', async () => {
    const refused = await emitRaw(MEMBER, 'create_cluster', CREATE_PARAS);
    expect(refused.error_code).toBe(String(KcmError.of('NO_RESOURCES', '').code));
    expect(refused.error_info).toMatch(new RegExp(`${HOSTS[0].replace(/\./g, '\\.')} takes 0 more \\(disk: 1\\.0 GB per storage node \\(max_storage_size\\), its datadir ${datadir(0)} had 30\\d MB free`));

    for (let i = 0; i < HOSTS.length; i++) await run('mount', ['-o', 'remount,size=1100m', datadir(i)]);
    await waitUntil('the grown datadirs recorded', async () => (HOSTS.every((_, i) => (recordedFree(i) ?? 0) > GB) ? true : undefined), 10_000, 50);
    const plan = await emit(MEMBER, 'create_cluster', { ...CREATE_PARAS, dry_run: '1' });
    expect(plan.error_code).toBe('0');
  });

  it('a datadir filled after registration is refused at placement, naming the disk and its free space', async () => {
    // Leave about 20 MB free on host 1's datadir.
    const { stdout } = await run('df', ['-B1', '--output=avail', datadir(1)]);
    const avail = Number(stdout.trim().split('\n').pop());
    await writeFile(path.join(datadir(1), 'filler'), Buffer.alloc(avail - 20 * MB));
    try {
      await waitUntil('the filled datadir recorded', async () => ((recordedFree(1) ?? GB) < 64 * MB ? true : undefined), 10_000, 50);
      const refused = await emitRaw(MEMBER, 'create_cluster', CREATE_PARAS);
      expect(refused.error_code).toBe(String(KcmError.of('NO_RESOURCES', '').code));
      // The figure is the measured one, which the filled tmpfs need not hold to the MB (a CI run saw 59).
      expect(refused.error_info).toMatch(new RegExp(`${HOSTS[1].replace(/\./g, '\\.')} takes 0 more \\(disk: .*its datadir ${datadir(1)} had \\d{1,2} MB free when measured at \\d{4}-`));
    } finally {
      await run('rm', ['-f', path.join(datadir(1), 'filler')]);
    }
    await waitUntil('the emptied datadir recorded', async () => ((recordedFree(1) ?? 0) > GB ? true : undefined), 10_000, 50);
  });

  it('an install into a wal_log_dir too small for its redo log fails naming the directory and its free bytes', async () => {
    // 100 MB: the datadir has room (placement passes), the wal_log_dir not for a 48 MB redo log and binlogs.
    await mountTmpfs(f.dirs(2).wal_log_dir, '100m');
    const ack = await emit(MEMBER, 'create_cluster', CREATE_PARAS);
    const end = await waitForJobEnd([MEMBER], ack.job_id, 60_000);
    expect(end.status).toBe('failed');
    expect(end.error_code).toBe(String(KcmError.of('NO_RESOURCES', '').code));
    expect(end.error_info).toContain(`not enough disk space: wal_log_dir ${f.dirs(2).wal_log_dir} on ${HOSTS[2]} has 100 MB free (${100 * MB} bytes), 112 MB needed`);
  });
});

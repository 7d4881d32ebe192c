// CPU isolation: the limit files for each hierarchy and mode, hierarchy detection, and the
// CgroupAgent over gRPC moving a real process tree into a real cgroup on this host.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { CgroupAgentClient } from '@kcm/agent-api';
import { startAgent, type RunningAgent } from '../../src/index';
import { cpuLimitWrites, applyCpuLimit, removeCpuLimit, validateCpuLimit } from '../../src/capabilities/cgroup/cpu-limit';
import { detectCpuHierarchy, findCpuHierarchy, parseMounts } from '../../src/capabilities/cgroup/detect';
import { descendantsOf, listenerPid, listeningInodes, parentMap } from '../../src/capabilities/cgroup/processes';

const readTrim = async (file: string) => (await readFile(file, 'utf8')).trim();
const procsOf = async (dir: string) => (await readFile(path.join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean).map(Number);

describe('cpu limit files', () => {
  it('quota is a hard cap of cpu_cores per 100 ms period (v1 cfs_quota_us, v2 cpu.max)', () => {
    expect(cpuLimitWrites('v2', { cores: 2, mode: 'quota' })).toEqual([
      { name: 'cpu.max', value: '200000 100000' },
      { name: 'cpu.weight', value: '100' },
    ]);
    expect(cpuLimitWrites('v1', { cores: 1.5, mode: 'quota' })).toEqual([
      { name: 'cpu.cfs_period_us', value: '100000' },
      { name: 'cpu.cfs_quota_us', value: '150000' },
      { name: 'cpu.shares', value: '1024' },
    ]);
  });

  it('share is a proportional weight (1 core = 1024 shares = weight 100) and lifts any quota', () => {
    expect(cpuLimitWrites('v1', { cores: 0.5, mode: 'share' })).toEqual([
      { name: 'cpu.cfs_quota_us', value: '-1' },
      { name: 'cpu.shares', value: '512' },
    ]);
    expect(cpuLimitWrites('v2', { cores: 4, mode: 'share' })).toEqual([
      { name: 'cpu.max', value: 'max 100000' },
      { name: 'cpu.weight', value: '400' },
    ]);
  });

  it('refuses a mode it does not know and core counts that are not positive', () => {
    expect(() => validateCpuLimit(2, 'burst')).toThrow(/mode/);
    expect(() => validateCpuLimit(0, 'quota')).toThrow(/cpu_cores/);
    expect(() => validateCpuLimit(Number.NaN, 'share')).toThrow(/cpu_cores/);
  });
});

describe('hierarchy detection', () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-cgdetect-'));
  });
  afterAll(() => rm(tmp, { recursive: true, force: true }));

  it('a hybrid host (v1 cpu plus a unified mount without cpu) is v1', async () => {
    const unified = path.join(tmp, 'unified');
    await mkdir(unified);
    await writeFile(path.join(unified, 'cgroup.controllers'), 'hugetlb\n');
    const mounts = `cgroup2 ${unified} cgroup2 rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n`;
    expect(await findCpuHierarchy(mounts)).toEqual({ version: 'v1', root: '/sys/fs/cgroup/cpu' });
  });

  it('a unified mount that offers cpu is v2', async () => {
    const v2 = path.join(tmp, 'with space');
    await mkdir(v2);
    await writeFile(path.join(v2, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    const mounts = `cgroup2 ${v2.replace(' ', '\\040')} cgroup2 rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n`;
    expect(parseMounts(mounts)[0].dir).toBe(v2);
    expect(await findCpuHierarchy(mounts)).toEqual({ version: 'v2', root: v2 });
  });

  it("this host's hierarchy has the limit files its version implies", async () => {
    const h = await detectCpuHierarchy();
    expect(h).toBeDefined();
    await expect(stat(path.join(h!.root, h!.version === 'v2' ? 'cgroup.controllers' : 'cpu.cfs_quota_us'))).resolves.toBeDefined();
  });

  it('v2: enables the cpu controller down the path before writing cpu.max (on a directory shaped like cgroupfs)', async () => {
    // This host has no v2 cpu controller, so the v2 writes are checked on plain files.
    const root = path.join(tmp, 'fake-v2');
    await mkdir(path.join(root, 'kcm'), { recursive: true });
    await writeFile(path.join(root, 'cgroup.subtree_control'), 'memory\n');
    await writeFile(path.join(root, 'kcm', 'cgroup.subtree_control'), '');
    const applied = await applyCpuLimit({ version: 'v2', root }, { kind: 'mysql', hostaddr: '127.0.2.1', port: 57001 }, { cores: 2, mode: 'quota' }, []);
    expect(applied.dir).toBe(path.join(root, 'kcm', 'mysql-127.0.2.1-57001'));
    expect(await readTrim(path.join(root, 'cgroup.subtree_control'))).toBe('+cpu');
    expect(await readTrim(path.join(root, 'kcm', 'cgroup.subtree_control'))).toBe('+cpu');
    expect(await readTrim(path.join(applied.dir, 'cpu.max'))).toBe('200000 100000');
  });
});

describe('removing a limit from a process that keeps forking (a postmaster starting backends)', () => {
  it('deletes the cgroup every time though children are born inside it during the sweep', async () => {
    const h = await detectCpuHierarchy();
    const instance = { kind: 'pg' as const, hostaddr: '127.0.9.9', port: 9999 };
    // A new child every 2 ms, each living 300 ms: some are always inside the cgroup.
    const parent = spawn('sh', ['-c', 'while :; do sleep 0.3 & sleep 0.002; done'], { stdio: 'ignore' });
    try {
      const failures: string[] = [];
      for (let i = 0; i < 40; i++) {
        await applyCpuLimit(h!, instance, { cores: 1, mode: 'share' }, [parent.pid!]);
        await new Promise((resolve) => setTimeout(resolve, 30));
        await removeCpuLimit(h!, instance).catch((err: Error) => failures.push(err.message));
      }
      expect(failures).toEqual([]);
      await expect(stat(path.join(h!.root, 'kcm', 'pg-127.0.9.9-9999'))).rejects.toThrow(/ENOENT/);
    } finally {
      spawn('pkill', ['-KILL', '-P', String(parent.pid)]);
      parent.kill('SIGKILL');
    }
  }, 60_000);
});

describe('processes of an instance', () => {
  it('finds the listening socket of a port in /proc/net/tcp text', () => {
    const text = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 0102007F:DB0E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0',
      '   1: 0102007F:DB0E 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 100 0 0 10 0',
    ].join('\n');
    expect(listeningInodes(text, 0xdb0e)).toEqual(['4242']);
    expect(listeningInodes(text, 56000)).toEqual([]);
    expect(listeningInodes(text, 0xdb0e, '127.0.2.1')).toEqual(['4242']);
    // Another loopback host's instance on the same port is not ours.
    expect(listeningInodes(text, 0xdb0e, '127.0.2.2')).toEqual([]);
  });

  it('lists a process and its descendants, parents first', () => {
    const parents = new Map([[10, 1], [11, 10], [12, 10], [13, 11], [20, 1]]);
    expect(descendantsOf(10, parents)).toEqual([10, 11, 12, 13]);
  });
});

describe('CgroupAgent over gRPC on this host', () => {
  const PORT = 56391;
  let tmp: string;
  let agent: RunningAgent;
  let client: CgroupAgentClient;
  let tree: ChildProcess;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-cgroup-'));
    agent = await startAgent({ hostaddr: '127.0.2.1', port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'agent') });
    client = new CgroupAgentClient(agent.address);
    // A stand-in instance: a listener on the port with two children of its own.
    const script = `const { spawn } = require('node:child_process');
      for (let i = 0; i < 2; i++) spawn('sleep', ['60'], { stdio: 'ignore' });
      require('node:net').createServer().listen(${PORT}, '127.0.2.1', () => console.log('listening'));`;
    tree = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => tree.stdout!.once('data', () => resolve()));
  });

  afterAll(async () => {
    const pids = descendantsOf(tree.pid!, await parentMap()).reverse();
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    client.close();
    await agent.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('finds the instance by its listening port and moves it and its children into kcm/mysql-<hostaddr>-<port> with shares', async () => {
    expect(await listenerPid(PORT, '127.0.2.1')).toBe(tree.pid);
    expect(await listenerPid(PORT, '127.0.2.9')).toBeUndefined();
    const info = await client.info();
    const reply = await client.setCpuLimit('cg-share-1', { port: PORT, kind: 'mysql', cpuCores: 0.5, mode: 'share' });
    expect(reply.version).toBe(info.version);
    expect(reply.cgroup_path).toBe(path.join(info.cpu_root, 'kcm', `mysql-127.0.2.1-${PORT}`));
    expect(reply.pids).toHaveLength(3);
    expect(reply.pids[0]).toBe(tree.pid);
    expect((await procsOf(reply.cgroup_path)).sort()).toEqual([...reply.pids].sort());
    const weightFile = info.version === 'v2' ? 'cpu.weight' : 'cpu.shares';
    expect(await readTrim(path.join(reply.cgroup_path, weightFile))).toBe(info.version === 'v2' ? '50' : '512');
  });

  it('switching the same instance to quota replaces the weight with a cap', async () => {
    const reply = await client.setCpuLimit('cg-quota-1', { port: PORT, kind: 'mysql', pid: tree.pid, cpuCores: 2, mode: 'quota' });
    if (reply.version === 'v2') expect(await readTrim(path.join(reply.cgroup_path, 'cpu.max'))).toBe('200000 100000');
    else {
      expect(await readTrim(path.join(reply.cgroup_path, 'cpu.cfs_quota_us'))).toBe('200000');
      expect(await readTrim(path.join(reply.cgroup_path, 'cpu.shares'))).toBe('1024');
    }
  });

  it('removing the limit moves the processes back and deletes the cgroup', async () => {
    const reply = await client.removeCpuLimit('cg-remove-1', PORT, 'mysql');
    expect(reply.pids).toHaveLength(3);
    await expect(stat(reply.cgroup_path)).rejects.toThrow(/ENOENT/);
    const again = await client.removeCpuLimit('cg-remove-2', PORT, 'mysql');
    expect(again.pids).toEqual([]);
  });

  it('refuses an unknown kind and a port nobody listens on', async () => {
    await expect(client.setCpuLimit('cg-bad-1', { port: PORT, kind: 'oracle' as 'pg', cpuCores: 1, mode: 'quota' })).rejects.toThrow(/kind/);
    await expect(client.setCpuLimit('cg-bad-2', { port: 56392, kind: 'pg', cpuCores: 1, mode: 'quota' })).rejects.toThrow(/no process listens on port 56392/);
  });
});

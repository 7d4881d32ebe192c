// Secrets at rest and who sees them, on real engines: a one-member manager and three agent
// processes (their own main, umask included) on 127.0.2.1-3, a cluster of 1 shard x 3
// MariaDB nodes and 1 PostgreSQL compute node created with the operator's token. Then:
// `strings` over every file of the manager's and each agent's data directory finds none of
// the generated passwords; no file or directory there, nor in the instances' directories,
// is readable by other users; get_status shows the passwords to the creator and an admin
// and hides them from a viewer.

import { execFile } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useOwnerOnlyUmask } from '@kcm/common';
import { emitRaw } from '../helpers/emit-client';
import { HOSTS, startClusterFixture, type ClusterFixture } from '../cluster/cluster-fixture';
import { clusterParas } from '../cluster/cluster-paras';
import { registerMachines } from '../cluster/machines';
import { openTestAccounts } from '../helpers/secrets';
import { authHeader } from '../helpers/tokens';

const run = promisify(execFile);

const CREATE_PARAS = clusterParas({ nick_name: 'secrets', computer_iplists: [HOSTS[0]] });

/** Every file and directory under `dir` (symlinks not followed), with its mode. */
async function walk(dir: string): Promise<{ file: string; mode: number; isDir: boolean; isSocket: boolean }[]> {
  const out: { file: string; mode: number; isDir: boolean; isSocket: boolean }[] = [];
  const visit = async (p: string) => {
    const st = await lstat(p);
    out.push({ file: p, mode: st.mode & 0o777, isDir: st.isDirectory(), isSocket: st.isSocket() });
    if (st.isDirectory()) for (const entry of await readdir(p)) await visit(path.join(p, entry));
  };
  await visit(dir);
  return out;
}

describe('secrets at rest (real engines)', () => {
  let f: ClusterFixture;
  let jobId: string;
  let previousUmask: number;

  beforeAll(async () => {
    // The manager runs in this process: give it the umask its main sets (the agents are processes of their own).
    previousUmask = process.umask();
    useOwnerOnlyUmask();
    // Snapshots every 20 entries: the state is in a snapshot file too, not only in log entries.
    f = await startClusterFixture({ processAgentHosts: HOSTS, managerConfig: { snapshotEntries: 20 } });
    await registerMachines(f);
    const ack = await emitRaw(f.member, 'create_cluster', CREATE_PARAS, { authorization: authHeader('operator').authorization });
    expect(ack.error_code, ack.error_info).toBe('0');
    jobId = ack.job_id;
    for (let i = 0; i < 600; i++) {
      const s = await emitRaw(f.member, 'get_status', {}, { jobId });
      if (s.status === 'done' || s.status === 'failed') {
        expect(s.status, s.error_info).toBe('done');
        break;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }, 400_000);

  afterAll(async () => {
    await f?.close();
    process.umask(previousUmask);
  });

  const passwords = () => Object.values(openTestAccounts(Object.values(f.manager.store.state().clusters)[0].accounts)).map((a) => a.password);
  const dataDirs = () => [path.join(f.tmp, 'manager'), ...HOSTS.map((h) => path.join(f.tmp, `agent-${h}`))];

  it('strings over every file of the manager\'s and the agents\' data directories finds none of the generated passwords', async () => {
    const secrets = passwords();
    expect(secrets).toHaveLength(4);
    let files = 0;
    for (const dir of dataDirs()) {
      for (const entry of await walk(dir)) {
        if (entry.isDir) continue;
        files++;
        const { stdout } = await run('strings', ['-a', '-n', '6', entry.file], { maxBuffer: 256 * 1024 * 1024 });
        for (const secret of secrets) expect(stdout.includes(secret), `${entry.file} holds a generated password`).toBe(false);
      }
    }
    expect(files).toBeGreaterThan(5);
  });

  it('no file or directory the manager, the agents or the instances have is readable by other users', async () => {
    const dirs = [...dataDirs(), ...HOSTS.flatMap((_, i) => Object.values(f.dirs(i)))];
    const open: string[] = [];
    for (const dir of dirs) {
      for (const entry of await walk(dir)) {
        // Directories mysql/postgres must pass through to their own are 0711: enter, never list or read.
        // A server's socket is 0777 by design; the 0750 directory it is in keeps others out.
        const readable = (entry.mode & 0o004) !== 0 && !entry.isSocket;
        if (readable) open.push(`${entry.file} ${entry.mode.toString(8)}`);
      }
    }
    expect(open).toEqual([]);
    for (const dir of dataDirs()) expect((await lstat(dir)).mode & 0o077, dir).toBe(0);
  });

  it('get_status of the create_cluster shows the passwords to its creator and an admin, and hides them from a viewer', async () => {
    const [, , storage, computer] = passwords();
    const as = (role: 'operator' | 'admin' | 'viewer') => emitRaw(f.member, 'get_status', {}, { jobId, authorization: authHeader(role).authorization });
    expect((await as('operator')).attachment).toMatchObject({ storage_pwd: storage, computer_pwd: computer });
    expect((await as('admin')).attachment).toMatchObject({ storage_pwd: storage, computer_pwd: computer });
    const viewer = await as('viewer');
    expect(viewer.error_code).toBe('0');
    expect(viewer.attachment).toMatchObject({ storage_pwd: '<hidden>', computer_pwd: '<hidden>' });
  });
});

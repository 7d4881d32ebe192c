// rotate_cluster_passwords against fake agents: what it asks of every node, in which order
// with the replicated state, how it refuses, and that a new leader (or a later submission)
// finishes a rotation with the very passwords recorded before any engine was touched. The
// real-engine run is test/cluster/rotate-passwords.test.ts.

import { describe, expect, it } from 'vitest';
import type { Agents, PasswordAgentApi } from '@kcm/agent-api';
import { parseRequest } from '@kcm/protocol';
import { rotateClusterPasswords } from '../../src/jobs/passwords';
import { JobRunner } from '../../src/jobs/framework/runner';
import { CommandKind } from '../../src/meta/commands';
import type { ClusterRecord, MetaState } from '../../src/meta/state';
import { openAccounts } from '../../src/secrets/accounts';
import { liveAccount } from '../../src/secrets/live-accounts';
import { shardEndpoints } from '../../src/jobs/instance-ops';
import { cluster as clusterRecord, stateWith } from '../helpers/cluster-state';
import { LocalStore, until } from '../helpers/local-store';
import { recordingAgents, type Call } from '../helpers/recording-agents';
import { stepServices } from '../helpers/step-services';
import { startHarness } from './grow-harness';
import { storedAccount, testSecretBox } from '../../../../test/helpers/secrets';

const box = testSecretBox();
const open = (c: ClusterRecord) => openAccounts(box, c.accounts);
const passwordsOf = (calls: Call[], method: string) => calls.filter((c) => c.method === method);

/** Recording agents whose password calls first check the rotation is already committed. */
function checkedAgents(state: () => MetaState, clusterId: string) {
  const recording = recordingAgents({ agentPort: 58100, failures: [] });
  const uncommitted: string[] = [];
  const agents: Agents = {
    ...recording.agents,
    passwords: (host): PasswordAgentApi => {
      const real = recording.agents.passwords(host);
      const check = <T>(method: string, call: () => Promise<T>) => {
        if (!state().clusters[clusterId]?.passwordRotation) uncommitted.push(`${method} on ${host}`);
        return call();
      };
      return {
        address: real.address,
        setMariaDbPasswords: (...a) => check('mariadb', () => real.setMariaDbPasswords(...a)),
        setReplicationPassword: (...a) => check('replication', () => real.setReplicationPassword(...a)),
        setComputePassword: (...a) => check('compute', () => real.setComputePassword(...a)),
        close: () => {},
      };
    },
  };
  return { agents, calls: recording.calls, uncommitted };
}

describe('rotate_cluster_passwords', () => {
  it('records the new sealed passwords first, sets them on every node, then makes them current', async () => {
    let h!: Awaited<ReturnType<typeof startHarness>>;
    let clusterId = '';
    const fake = checkedAgents(() => h.store.s, '1');
    h = await startHarness({ agents: fake.agents });
    const before = await h.readyCluster(); // 2 shards x 3 nodes, 2 compute nodes
    clusterId = before.id;
    const old = open(before);
    fake.calls.length = 0;

    const status = await h.run('rotate_cluster_passwords', { cluster_id: clusterId });
    expect(status.status, status.errorInfo).toBe('done');
    expect(fake.uncommitted).toEqual([]);

    const after = h.store.s.clusters[clusterId];
    expect(after.passwordRotation).toBeUndefined();
    const now = open(after);
    for (const role of ['admin', 'replication', 'storage', 'computer'] as const) {
      expect(now[role].user).toBe(old[role].user);
      expect(now[role].password).not.toBe(old[role].password);
      expect(after.accounts[role].sealedPassword).not.toContain(now[role].password);
    }
    // Every storage node gets the three MariaDB accounts; each standby (2 per shard) the replication password.
    const mariadb = passwordsOf(fake.calls, 'passwords.mariadb');
    expect(mariadb).toHaveLength(6);
    for (const c of mariadb) expect(c.request.accounts).toEqual(['admin', 'replication', 'storage'].map((role) => ({ role, ...now[role as 'admin'] })));
    const standbys = passwordsOf(fake.calls, 'passwords.replication');
    expect(standbys).toHaveLength(4);
    for (const c of standbys) expect({ user: c.request.user, password: c.request.password }).toEqual(now.replication);
    const masters = Object.values(after.shards).map((s) => s.nodes[s.masterNodeId]);
    for (const m of masters) expect(standbys.some((c) => c.host === m.hostaddr && c.request.port === m.port)).toBe(false);
    // Every compute node: its account, and user mappings written with the new storage password.
    const comps = passwordsOf(fake.calls, 'passwords.compute');
    expect(comps.map((c) => c.request.password)).toEqual([now.computer.password, now.computer.password]);
    const syncs = passwordsOf(fake.calls, 'pg.sync');
    expect(syncs).toHaveLength(2);
    for (const c of syncs) for (const shard of c.request.shards) expect({ user: shard.user, password: shard.password }).toEqual(now.storage);
    // The MariaDB accounts are set before any standby or compute node uses them.
    const firstUse = fake.calls.findIndex((c) => c.method !== 'passwords.mariadb');
    expect(fake.calls.slice(0, firstUse).every((c) => c.method === 'passwords.mariadb')).toBe(true);
    expect(firstUse).toBe(6);

    // The client accounts' new passwords are in the result (opened for an admin), the internal ones are not.
    expect(status.attachment).toEqual({
      cluster_id: clusterId, rotated: 'admin,replication,storage,computer',
      computer_user: now.computer.user, computer_pwd: now.computer.password, storage_user: now.storage.user, storage_pwd: now.storage.password,
    });
    const forViewer = await h.manager.service.getStatus(status.jobId, { identity: { name: 'someone', role: 'viewer' } });
    expect(forViewer.attachment).toMatchObject({ computer_pwd: '<hidden>', storage_pwd: '<hidden>' });
  });

  it('rotates only the accounts named, and touches only the nodes that hold them', async () => {
    const h = await startHarness();
    const before = await h.readyCluster();
    const old = open(before);
    const status = await h.run('rotate_cluster_passwords', { cluster_id: before.id, accounts: ['computer'] });
    expect(status.status, status.errorInfo).toBe('done');
    const now = open(h.store.s.clusters[before.id]);
    expect(now.computer.password).not.toBe(old.computer.password);
    for (const role of ['admin', 'replication', 'storage'] as const) expect(now[role]).toEqual(old[role]);
    expect([...new Set(h.calls.map((c) => c.method))]).toEqual(['passwords.compute']);
    expect(status.attachment).toEqual({ cluster_id: before.id, rotated: 'computer', computer_user: now.computer.user, computer_pwd: now.computer.password });
  });

  it('refuses an unknown cluster, an unknown or repeated account, and a busy cluster, naming the field and committing nothing', async () => {
    const h = await startHarness();
    const ready = await h.readyCluster();
    const jobs = h.jobCount();
    expect(await h.refusal('rotate_cluster_passwords', { cluster_id: '99' })).toEqual(['NOT_FOUND', 'paras.cluster_id: cluster 99 does not exist']);
    expect(h.jobCount()).toBe(jobs);

    const parsed = (accounts: unknown) => parseRequest({ version: '1.0', job_type: 'rotate_cluster_passwords', timestamp: '1', user_name: 't', paras: { cluster_id: ready.id, accounts } });
    const unknown = parsed(['storage', 'root']);
    expect(unknown.ok).toBe(false);
    if (!unknown.ok) expect([unknown.error.errorName, unknown.error.message]).toEqual(['INVALID_PARAS', 'paras.accounts[1]: must be one of "admin", "replication", "storage", "computer", got "root"']);
    const twice = parsed(['storage', 'storage']);
    if (!twice.ok) expect(twice.error.message).toContain('paras.accounts[1]: must not name an account twice');
    expect(twice.ok).toBe(false);

    // Busy: another job runs or waits on the cluster.
    const state = stateWith(clusterRecord('7', 'ready', [['1', '10.0.0.1', 5000]], []));
    state.runQueues['cluster:7'] = ['12'];
    state.jobs['12'] = { jobType: 'add_comps' } as MetaState['jobs'][string];
    expect(() => rotateClusterPasswords.validate!({ cluster_id: '7' }, state)).toThrow('paras.cluster_id: cluster 7 is busy: job 12 (add_comps) is running or waiting on it; rotate its passwords when they end');
    expect(state.clusters['7'].passwordRotation).toBeUndefined();
  });

  it('a rotation that fails part-way says so, keeps its passwords recorded, and the next submission finishes it with the same ones', async () => {
    let h!: Awaited<ReturnType<typeof startHarness>>;
    const fake = checkedAgents(() => h.store.s, '1');
    let computeFails = true;
    const agents: Agents = {
      ...fake.agents,
      passwords: (host) => {
        const inner = fake.agents.passwords(host);
        return { ...inner, setComputePassword: (...a) => (computeFails ? Promise.reject(new Error(`SetComputePassword failed on ${host}`)) : inner.setComputePassword(...a)) };
      },
    };
    h = await startHarness({ agents });
    const before = await h.readyCluster();
    const old = open(before);
    const failed = await h.run('rotate_cluster_passwords', { cluster_id: before.id });
    expect(failed.status).toBe('failed');
    expect(failed.errorInfo).toContain(
      `the new passwords of admin, replication, storage, computer stay recorded as an unfinished rotation (every node has the new password of admin, replication, storage); submit rotate_cluster_passwords for cluster ${before.id} again to finish it with the same passwords`,
    );
    const pending = h.store.s.clusters[before.id].passwordRotation!;
    const recorded = openAccounts(box, { ...before.accounts, ...pending.accounts } as ClusterRecord['accounts']);
    // kcm's own connections use what every node accepts: the new storage password, the old computer one.
    expect(liveAccount(box, h.store.s.clusters[before.id], 'storage')).toEqual(recorded.storage);
    expect(liveAccount(box, h.store.s.clusters[before.id], 'computer')).toEqual(old.computer);
    // The catalog sync and the failure detector reach the shards with what the shards take now.
    for (const e of shardEndpoints(box, h.store.s.clusters[before.id])) expect({ user: e.user, password: e.password }).toEqual(recorded.storage);
    expect(open(h.store.s.clusters[before.id])).toEqual(old);

    const jobs = h.jobCount();
    expect(await h.refusal('rotate_cluster_passwords', { cluster_id: before.id, accounts: ['storage'] })).toEqual([
      'CONFLICT',
      `paras.accounts: cluster ${before.id} has an unfinished rotation of admin, replication, storage, computer (job ${failed.jobId}); finish it first: submit without accounts, or with exactly admin, replication, storage, computer`,
    ]);
    expect(h.jobCount()).toBe(jobs);

    computeFails = false;
    fake.calls.length = 0;
    const finished = await h.run('rotate_cluster_passwords', { cluster_id: before.id });
    expect(finished.status, finished.errorInfo).toBe('done');
    expect(open(h.store.s.clusters[before.id])).toEqual(recorded);
    for (const c of passwordsOf(fake.calls, 'passwords.compute')) expect(c.request.password).toBe(recorded.computer.password);
    expect(finished.attachment).toMatchObject({ computer_pwd: recorded.computer.password, storage_pwd: recorded.storage.password });
  });
});

describe('rotate_cluster_passwords resumed by a new leader', () => {
  it('a leader lost between steps leaves the recorded passwords; the next one sets exactly those and finishes', async () => {
    const store = new LocalStore();
    const accounts = {
      admin: storedAccount({ user: 'kcm_admin_1', password: 'old-admin-password' }),
      replication: storedAccount({ user: 'kcm_repl_1', password: 'old-repl-password' }),
      storage: storedAccount({ user: 'storage_1', password: 'old-storage-password' }),
      computer: storedAccount({ user: 'computer_1', password: 'old-computer-password' }),
    };
    const c = { ...clusterRecord('1', 'ready', [['1', '10.0.0.1', 5000], ['2', '10.0.0.2', 5000], ['3', '10.0.0.3', 5000]], [['1', '10.0.0.1', 6000]]), accounts };
    Object.assign(store.s, stateWith(c));
    const fake = checkedAgents(() => store.s, '1');
    // The first leader stops answering for good inside the compute node step (as if SIGKILLed there).
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let firstLeader = true;
    let computeReached = false;
    const agents: Agents = {
      ...fake.agents,
      passwords: (host) => {
        const inner = fake.agents.passwords(host);
        return { ...inner, setComputePassword: async (...a) => {
            if (!firstLeader) return inner.setComputePassword(...a);
            computeReached = true;
            await held;
            throw new Error('this leader is gone');
          },
        };
      },
    };
    const registry = new Map([[rotateClusterPasswords.jobType, rotateClusterPasswords]]);
    const out = await store.propose({ kind: CommandKind.JobSubmitted, at: 0, jobType: 'rotate_cluster_passwords', sentJobType: 'rotate_cluster_passwords', paras: { cluster_id: '1' }, requestId: null, lockKey: 'cluster:1' });
    const jobId = (out as { ok: true; value: { jobId: string } }).value.jobId;

    const oldLeader = new JobRunner(store, registry, stepServices(store, { agents }));
    oldLeader.start();
    await until(() => computeReached || store.s.jobs[jobId].status === 'failed');
    expect(store.s.jobs[jobId].result?.errorInfo).toBeUndefined();
    store.failProposals = true;
    const stopped = oldLeader.stop();
    release();
    await stopped;
    expect(store.s.jobs[jobId].status).toBe('ongoing');
    const rotation = store.s.clusters['1'].passwordRotation!;
    expect(rotation.applied.sort()).toEqual(['admin', 'replication', 'storage']);
    const recorded = openAccounts(box, { ...accounts, ...rotation.accounts } as ClusterRecord['accounts']);
    // The old passwords are still the cluster's accounts; kcm already uses the ones every node has.
    expect(openAccounts(box, store.s.clusters['1'].accounts).computer.password).toBe('old-computer-password');
    expect(liveAccount(box, store.s.clusters['1'], 'storage')).toEqual(recorded.storage);

    store.failProposals = false;
    firstLeader = false;
    const firstRunCalls = fake.calls.length;
    const newLeader = new JobRunner(store, registry, stepServices(store, { agents }));
    newLeader.start();
    await until(() => store.s.jobs[jobId].status !== 'ongoing');
    await newLeader.stop();
    expect(store.s.jobs[jobId].result?.errorInfo ?? '').toBe('');
    expect(store.s.jobs[jobId].status).toBe('done');
    // Resumed at the unfinished step, with the recorded passwords: the compute account and the mappings.
    const resumed = fake.calls.slice(firstRunCalls);
    expect(resumed.map((x) => x.method)).toEqual(['passwords.compute', 'pg.sync']);
    expect(resumed[0].request.password).toBe(recorded.computer.password);
    expect(resumed[1].request.shards[0]).toMatchObject(recorded.storage);
    expect(openAccounts(box, store.s.clusters['1'].accounts)).toEqual(recorded);
    expect(store.s.clusters['1'].passwordRotation).toBeUndefined();
    expect(fake.uncommitted).toEqual([]);
  });
});

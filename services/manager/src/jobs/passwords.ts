// Job: rotate_cluster_passwords (beyond the spec's list, issue 16). New generated passwords
// for some or all of a cluster's accounts, set on every storage and compute node.
//
// Crash safety: the new passwords are committed (sealed) in the cluster's record before
// any engine is touched, so a leader killed at any point leaves them to the next one, which
// resumes at the first unfinished step and sets the same passwords again (harmless: every
// agent command sets a given password). A role is marked applied once every node accepts
// its new password; from then on kcm's own connections use it (secrets/live-accounts.ts).
// A rotation that fails part-way stays recorded: the job's error says so, and the next
// rotate_cluster_passwords of the cluster finishes it with the same passwords.

import { CLUSTER_ACCOUNTS, KcmError, type ParasOf, type RotateClusterPasswordsResult } from '@kcm/protocol';
import type { RoleAccount } from '@kcm/agent-api';
import { CommandKind } from '../meta/commands';
import type { ClusterAccountRole, ClusterAccounts, ClusterRecord, MetaState, PasswordRotationRecord, StoredAccount } from '../meta/state';
import { openAccount, sealAccount } from '../secrets/accounts';
import type { SecretBox } from '../secrets/secret-box';
import { clusterById, forEachInstance, readyCluster } from './cluster-lookup';
import { generatePassword } from './credentials';
import { orThrow } from './framework/errors';
import { opId, storageNodes, syncCompCatalogs } from './instance-ops';
import type { JobOf, StepContext } from './framework/workflow';

type RotateParas = ParasOf<'rotate_cluster_passwords'>;
type Ctx = StepContext<RotateParas, RotateOutputs>;

const MARIADB_ROLES = ['admin', 'replication', 'storage'] as const;

interface RotateOutputs {
  'record new passwords': { roles: ClusterAccountRole[] };
  'set storage node passwords': { nodes: number };
  'point standbys at the new replication password': { standbys: number };
  'set compute node passwords and mappings': { comps: number };
  'make the new passwords current': RotateClusterPasswordsResult;
}

const sameRoles = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((r) => b.includes(r));

/** The checks before anything is committed; each refusal names its field. */
function checkRotation(p: RotateParas, state: MetaState): ClusterRecord {
  const cluster = readyCluster(state, p.cluster_id);
  const queue = state.runQueues[`cluster:${cluster.id}`] ?? [];
  if (queue.length > 0) {
    const busy = state.jobs[queue[0]];
    throw KcmError.of('CONFLICT', `paras.cluster_id: cluster ${cluster.id} is busy: job ${queue[0]} (${busy?.jobType ?? 'a job'}) ${queue.length > 1 ? `and ${queue.length - 1} more are` : 'is'} running or waiting on it; rotate its passwords when they end`, {
      field: 'paras.cluster_id',
    });
  }
  const unfinished = cluster.passwordRotation;
  if (unfinished && p.accounts && !sameRoles(p.accounts, Object.keys(unfinished.accounts))) {
    const roles = Object.keys(unfinished.accounts).join(', ');
    throw KcmError.of('CONFLICT', `paras.accounts: cluster ${cluster.id} has an unfinished rotation of ${roles} (job ${unfinished.jobId}); finish it first: submit without accounts, or with exactly ${roles}`, {
      field: 'paras.accounts',
    });
  }
  return cluster;
}

function rotationOf(ctx: Ctx): { cluster: ClusterRecord; rotation: PasswordRotationRecord } {
  const cluster = clusterById(ctx.state(), ctx.paras.cluster_id);
  const rotation = cluster.passwordRotation;
  if (!rotation || rotation.jobId !== ctx.jobId) throw KcmError.of('CONFLICT', `cluster ${cluster.id} has no password rotation of job ${ctx.jobId}`);
  return { cluster, rotation };
}

const rolesOf = (rotation: PasswordRotationRecord) => CLUSTER_ACCOUNTS.filter((r) => rotation.accounts[r] !== undefined);

async function markApplied(ctx: Ctx, roles: ClusterAccountRole[]): Promise<void> {
  if (roles.length === 0) return;
  orThrow(await ctx.propose({ kind: CommandKind.PasswordRotationApplied, at: ctx.now(), clusterId: ctx.paras.cluster_id, jobId: ctx.jobId, roles }));
}

/** A new password for each role, the user names kept (they are not secrets; clients keep theirs). */
function newPasswords(box: SecretBox, cluster: ClusterRecord, roles: readonly ClusterAccountRole[]): Partial<ClusterAccounts> {
  const out: Partial<ClusterAccounts> = {};
  for (const role of roles) out[role] = sealAccount(box, { user: cluster.accounts[role].user, password: generatePassword() });
  return out;
}

export const rotateClusterPasswords: JobOf<'rotate_cluster_passwords', RotateOutputs> = {
  jobType: 'rotate_cluster_passwords',
  validate: (p, state) => void checkRotation(p, state),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: () => [
    {
      name: 'record new passwords',
      async run(ctx) {
        const cluster = clusterById(ctx.state(), ctx.paras.cluster_id);
        // A rotation already recorded (this job's, re-run; or an unfinished one it takes over) keeps its passwords.
        const accounts = cluster.passwordRotation ? {} : newPasswords(ctx.secrets, cluster, ctx.paras.accounts ?? CLUSTER_ACCOUNTS);
        const rotation = orThrow(await ctx.propose({ kind: CommandKind.PasswordRotationStarted, at: ctx.now(), clusterId: cluster.id, jobId: ctx.jobId, accounts })) as PasswordRotationRecord;
        return { roles: rolesOf(rotation) };
      },
    },
    {
      name: 'set storage node passwords',
      async run(ctx) {
        const { cluster, rotation } = rotationOf(ctx);
        const roles = MARIADB_ROLES.filter((r) => rotation.accounts[r]);
        if (roles.length === 0) return { nodes: 0 };
        const accounts: RoleAccount[] = roles.map((role) => ({ role, ...openAccount(ctx.secrets, rotation.accounts[role]!) }));
        const nodes = storageNodes(cluster).map((x) => x.node);
        await forEachInstance(nodes, (n) => `storage node ${n.hostaddr}:${n.port}`, (n) =>
          ctx.agents.passwords(n.hostaddr).setMariaDbPasswords(opId(ctx.jobId, 'passwords', `node-${n.id}`), n.port, accounts),
        );
        await markApplied(ctx, roles);
        return { nodes: nodes.length };
      },
    },
    {
      name: 'point standbys at the new replication password',
      async run(ctx) {
        const { cluster, rotation } = rotationOf(ctx);
        if (!rotation.accounts.replication) return { standbys: 0 };
        const replication = openAccount(ctx.secrets, rotation.accounts.replication);
        let standbys = 0;
        // Shards in parallel; one standby at a time within a shard, so the others keep acknowledging semi-sync commits.
        await forEachInstance(Object.values(cluster.shards), (s) => s.name, async (shard) => {
          for (const node of Object.values(shard.nodes)) {
            if (node.id === shard.masterNodeId) continue;
            await ctx.agents.passwords(node.hostaddr).setReplicationPassword(opId(ctx.jobId, 'replpass', `node-${node.id}`), node.port, replication);
            standbys++;
          }
        });
        return { standbys };
      },
    },
    {
      name: 'set compute node passwords and mappings',
      async run(ctx) {
        const { cluster, rotation } = rotationOf(ctx);
        const comps = Object.values(cluster.comps);
        if (rotation.accounts.computer) {
          const computer = openAccount(ctx.secrets, rotation.accounts.computer);
          await forEachInstance(comps, (c) => `compute node ${c.hostaddr}:${c.port}`, (c) =>
            ctx.agents.passwords(c.hostaddr).setComputePassword(opId(ctx.jobId, 'passwords', `comp-${c.id}`), c.port, computer),
          );
          await markApplied(ctx, ['computer']);
        }
        // The user mappings hold the storage password: the catalog sync writes the live one, which is the new one now.
        if (rotation.accounts.storage) await syncCompCatalogs(ctx.agents, ctx.secrets, ctx.jobId, 'fdw-passwords', rotationOf(ctx).cluster, comps);
        return { comps: comps.length };
      },
    },
    {
      name: 'make the new passwords current',
      async run(ctx) {
        const cluster = clusterById(ctx.state(), ctx.paras.cluster_id);
        const roles = ctx.outputs['record new passwords'].roles;
        // Before the commit the new passwords are the rotation's; after it (a re-run), the cluster's own.
        const rotated = cluster.passwordRotation?.jobId === ctx.jobId ? cluster.passwordRotation.accounts : cluster.accounts;
        const result = rotationResult(cluster.id, roles, rotated);
        orThrow(await ctx.propose({ kind: CommandKind.PasswordRotationFinished, at: ctx.now(), clusterId: cluster.id, jobId: ctx.jobId }));
        return result;
      },
    },
  ],
  result: (outputs) => outputs['make the new passwords current'],
  // Nothing is undone (the new passwords may be on some nodes already): the rotation stays
  // recorded, kcm keeps using for each account the password every node accepts, and the
  // error says how to finish.
  async rollback(ctx) {
    const rotation = clusterById(ctx.state(), ctx.paras.cluster_id).passwordRotation;
    if (!rotation) return undefined;
    const applied = rotation.applied.length ? `every node has the new password of ${rotation.applied.join(', ')}` : 'no account has its new password on every node yet';
    return `the new passwords of ${rolesOf(rotation).join(', ')} stay recorded as an unfinished rotation (${applied}); submit rotate_cluster_passwords for cluster ${ctx.paras.cluster_id} again to finish it with the same passwords`;
  },
};

/** The result: which accounts were rotated, and (sealed; get_status opens them for those allowed) the client accounts' new passwords. */
function rotationResult(clusterId: string, roles: ClusterAccountRole[], accounts: Partial<ClusterAccounts<StoredAccount>>): RotateClusterPasswordsResult {
  const result: RotateClusterPasswordsResult = { cluster_id: clusterId, rotated: roles.join(',') };
  if (roles.includes('computer') && accounts.computer) Object.assign(result, { computer_user: accounts.computer.user, computer_pwd: accounts.computer.sealedPassword });
  if (roles.includes('storage') && accounts.storage) Object.assign(result, { storage_user: accounts.storage.user, storage_pwd: accounts.storage.sealedPassword });
  return result;
}

// Two-phase commit through compute nodes under faults, on real engines (DESIGN.md section
// 12, README "In-doubt XA branches"): a cross-shard transfer is stopped by kcm_ddl's
// test-only fault points (kcm.transaction_fault) between its prepare and its commit, with
// the compute node killed and, in some cases, a shard master SIGKILLed as well. Every case
// checks that its fault landed (the branch was left prepared on the shard), then that the
// leader's in-doubt resolver ended it by the coordinator's decision within 30 s: the money
// moved whole or not at all, and no kcm branch stays prepared.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterRecord } from '@kcm/manager';
import { waitUntil } from './cluster-fixture';
import { mariadbdPid } from './ha-fixture';
import { startSqlCluster, type SqlCluster } from './sql-fixture';
import { balances, compSessionWithFault, createAccounts, holdCommitGate, preparedKcmBranches, transfer } from './transactions-fixture';

const RESOLVED_WITHIN_MS = 30_000;

describe('two-phase commit through compute nodes under faults (2 shards, 2 compute nodes)', () => {
  let s: SqlCluster;

  beforeAll(async () => {
    // A branch is in doubt after 10 s, not 3: the last case holds a commit at its gate
    // through a failover, and the resolver must not decide for a coordinator still alive.
    s = await startSqlCluster({ managerConfig: { xaInDoubtAfterMs: 10_000 } });
    const ids = Object.keys(s.cluster().shards);
    const c = await s.pgAs(s.comps()[0]);
    try {
      await createAccounts(c, ids, 4, 1000);
    } finally {
      await c.end();
    }
  }, 300_000);

  afterAll(async () => {
    await s?.close();
  }, 120_000);

  const firstComp = () => s.cluster().comps[Object.keys(s.cluster().comps)[0]];
  const masterOf = (cluster: ClusterRecord, i: number) => {
    const shard = Object.values(cluster.shards)[i];
    return shard.nodes[shard.masterNodeId];
  };
  /** The compute node answers again (its agent restarts a killed postmaster). */
  const compBack = () => waitUntil('the compute node accepting logins again', async () => {
    const at = { host: firstComp().hostaddr, port: firstComp().port };
    const c = await s.pgAs(at).catch(() => undefined);
    if (!c) return undefined;
    await c.end();
    return true;
  }, 60_000);
  /**
   * A transfer through the first compute node held at its pause_after_prepare gate (acct_b's
   * branch prepared on shard 2) while `meanwhile` runs; its outcome once the gate opens.
   */
  const transferHeldAfterPrepare = async (from: number, to: number, meanwhile: () => Promise<void>): Promise<string> => {
    const writer = await compSessionWithFault(firstComp(), s.computeUser, 'pause_after_prepare');
    const gateKeeper = await s.pgAs({ host: firstComp().hostaddr, port: firstComp().port });
    try {
      const gate = await holdCommitGate(gateKeeper);
      const committing = transfer(writer, from, to, 10).then(() => 'committed', (err: Error) => err.message);
      await waitUntil('acct_b\'s branch prepared on shard 2', async () => ((await preparedKcmBranches(s, 1)).length === 1 ? true : undefined), 10_000, 50);
      await meanwhile();
      await gate.open();
      return await committing;
    } finally {
      await writer.end().catch(() => {});
      await gateKeeper.end();
    }
  };
  const noBranchLeft = () => waitUntil('no kcm XA branch prepared on any shard master', async () => {
    const left = await Promise.all([0, 1].map((i) => preparedKcmBranches(s, i).catch(() => ['(master not answering)'])));
    return left.flat().length === 0 ? true : undefined;
  }, RESOLVED_WITHIN_MS);

  it('a compute node killed after its branch is prepared, before the decision: the resolver rolls the branch back and no money moves', async () => {
    const before = await balances(s);
    const writer = await compSessionWithFault(firstComp(), s.computeUser, 'crash_after_prepare');
    await expect(transfer(writer, 1, 1, 10)).rejects.toThrow();
    await writer.end().catch(() => {});
    // The fault landed where its name says: acct_b's part waits prepared on shard 2.
    expect(await preparedKcmBranches(s, 1)).toHaveLength(1);
    await noBranchLeft();
    expect(await balances(s)).toEqual(before);
    await compBack();
  }, 120_000);

  it('a compute node killed after the decision: the resolver commits the prepared branch and the transfer is whole', async () => {
    const before = await balances(s);
    const writer = await compSessionWithFault(firstComp(), s.computeUser, 'crash_after_decision');
    await expect(transfer(writer, 2, 2, 10)).rejects.toThrow();
    await writer.end().catch(() => {});
    expect(await preparedKcmBranches(s, 1)).toHaveLength(1);
    await noBranchLeft();
    const after = await balances(s);
    expect(after.get('a2')).toBe(before.get('a2')! - 10);
    expect(after.get('b2')).toBe(before.get('b2')! + 10);
    await compBack();
  }, 120_000);

  it('the coordinator shard\'s master SIGKILLed with the compute node after the decision: the decision survives the failover and the branch is committed by it', async () => {
    const before = await balances(s);
    const oldMaster = masterOf(s.cluster(), 0);
    const writer = await compSessionWithFault(firstComp(), s.computeUser, 'crash_after_decision');
    await expect(transfer(writer, 3, 3, 10)).rejects.toThrow();
    await writer.end().catch(() => {});
    process.kill(await mariadbdPid(oldMaster), 'SIGKILL');
    expect(await preparedKcmBranches(s, 1)).toHaveLength(1);
    await waitUntil('shard 1 failed over', async () => (masterOf(s.cluster(), 0).id !== oldMaster.id ? true : undefined), RESOLVED_WITHIN_MS);
    await noBranchLeft();
    const after = await balances(s);
    expect(after.get('a3')).toBe(before.get('a3')! - 10);
    expect(after.get('b3')).toBe(before.get('b3')! + 10);
    await compBack();
  }, 180_000);

  it('a compute node that hangs after prepare with its shard sessions open: the resolver ends the session holding the branch, rolls the branch back, and the resumed commit fails cleanly', async () => {
    const before = await balances(s);
    // The compute node is stuck at the gate, its sessions to both shards open: only its own
    // session may end the branch, so the resolver must end that session first.
    const outcome = await transferHeldAfterPrepare(1, 2, async () => {
      await noBranchLeft();
      expect(await balances(s)).toEqual(before);
    });
    // The resolver decided abort first, so the coordinator's decision is refused on its key.
    expect(outcome).toMatch(/Duplicate entry|failed/);
    expect(await balances(s)).toEqual(before);
    expect(s.f.logLines.some((l) => l.includes('killed the shard session holding an in-doubt XA branch'))).toBe(true);
  }, 120_000);

  it('a manual switch of the branch shard while its branch waits prepared: the new master holds the branch and it is committed by the decision', async () => {
    const before = await balances(s);
    const shard = Object.values(s.cluster().shards)[1];
    const oldMaster = shard.nodes[shard.masterNodeId];
    const assign = Object.values(shard.nodes).find((n) => n.id !== oldMaster.id)!;
    const outcome = await transferHeldAfterPrepare(2, 1, async () => {
      const reply = await s.f.runJob('manual_switch', { cluster_id: s.cluster().id, shard_id: shard.id, master_hostaddr: `${oldMaster.hostaddr}_${oldMaster.port}`, assign_hostaddr: `${assign.hostaddr}_${assign.port}` }, 60_000);
      expect(reply.error_info ?? '').toBe('');
      expect(masterOf(s.cluster(), 1).id).toBe(assign.id);
      expect(await preparedKcmBranches(s, 1)).toHaveLength(1);
    });
    // The coordinator commits with the decision; the branch's old master is read-only now,
    // so its second phase is the resolver's, on the new master.
    expect(outcome).toBe('committed');
    await noBranchLeft();
    const after = await balances(s);
    expect(after.get('a2')).toBe(before.get('a2')! - 10);
    expect(after.get('b1')).toBe(before.get('b1')! + 10);
  }, 180_000);

  it('a branch shard\'s master SIGKILLed while its branch is prepared: the promoted standby holds the branch and it is committed by the decision', async () => {
    const before = await balances(s);
    const oldMaster = masterOf(s.cluster(), 1);
    const outcome = await transferHeldAfterPrepare(4, 4, async () => {
      process.kill(await mariadbdPid(oldMaster), 'SIGKILL');
      await waitUntil('shard 2 failed over', async () => (masterOf(s.cluster(), 1).id !== oldMaster.id ? true : undefined), RESOLVED_WITHIN_MS);
      // The promoted standby holds the branch, prepared, as the old master did.
      expect(await preparedKcmBranches(s, 1)).toHaveLength(1);
    });
    // The compute node commits the coordinator with the decision; the branch's master is gone,
    // so its second phase is the resolver's.
    expect(outcome).toBe('committed');
    await noBranchLeft();
    const after = await balances(s);
    expect(after.get('a4')).toBe(before.get('a4')! - 10);
    expect(after.get('b4')).toBe(before.get('b4')! + 10);
  }, 180_000);
});

// cancel_job on a running create_cluster, on real engines: the job stops at its next step
// boundary, rolls back what it created, and ends failed with CANCELED (2004); nothing of the
// cluster is left: no process, no directory, no port, no cluster record.

import { access } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emit, jobStatus, waitForJobEnd } from '../helpers/emit-client';
import { enginePidsUnder, startClusterFixture, type ClusterFixture, waitUntil } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';

const MEMBER = '127.0.1.74:58174';
const AGENT_PORT = 58154;

describe('cancel_job on a running create_cluster (real engines)', () => {
  let f: ClusterFixture;

  beforeAll(async () => {
    f = await startClusterFixture({ member: MEMBER, agentPort: AGENT_PORT });
    await registerMachines(f);
  }, 120_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('stops at the next step boundary, rolls back, ends CANCELED, and leaves nothing of the cluster', async () => {
    const portsBefore = JSON.stringify(f.manager.store.state().ports);
    const ack = await emit(MEMBER, 'create_cluster', clusterParas({ nick_name: 'canceled', computer_iplists: [] }));
    // Canceled while the storage nodes are being installed: they exist on their hosts by then.
    await waitUntil('create_cluster installing storage nodes', async () => {
      const s = await jobStatus(MEMBER, ack.job_id);
      return (s.attachment as { progress?: { step_name: string } } | null)?.progress?.step_name === 'install storage nodes' ? true : undefined;
    }, 30_000, 50);
    const cluster = Object.values(f.manager.store.state().clusters).find((c) => c.nickName === 'canceled')!;
    const cancel = await emit(MEMBER, 'cancel_job', { job_id: ack.job_id });
    const canceled = await waitForJobEnd([MEMBER], cancel.job_id, 30_000);
    expect(canceled.status, canceled.error_info).toBe('done');
    expect(canceled.attachment).toEqual({ job_id: ack.job_id, outcome: 'stopping' });

    const end = await waitForJobEnd([MEMBER], ack.job_id, 120_000);
    expect(end.status).toBe('failed');
    expect(end.error_code).toBe('2004');
    expect(end.error_info).toMatch(/canceled by .* \(cancel_job\) before this step started/);

    const state = f.manager.store.state();
    expect(state.clusters[cluster.id]).toBeUndefined();
    expect(JSON.stringify(state.ports)).toBe(portsBefore);
    expect(await enginePidsUnder(f.tmp)).toEqual([]);
    const gone = async (dir: string) => access(dir).then(() => false, () => true);
    for (const n of Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes))) {
      for (const dir of [path.join(n.datadir, String(n.port)), path.join(n.logdir, String(n.port)), path.join(n.walLogDir, String(n.port))]) expect(await gone(dir), dir).toBe(true);
    }
    for (const c of Object.values(cluster.comps)) expect(await gone(path.join(c.compDatadir, String(c.port)))).toBe(true);
  }, 180_000);

  it('refuses a job that already ended, naming the field', async () => {
    const done = Object.values(f.manager.store.state().jobs).find((j) => j.status === 'done')!;
    const reply = await emit(MEMBER, 'cancel_job', { job_id: done.id }).catch((e: { reply: { error_code: string; error_info: string } }) => e.reply);
    expect(reply.error_info).toMatch(/^paras\.job_id: job \d+ already ended done/);
  });
});

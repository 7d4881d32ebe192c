// Dry runs: `"dry_run": "1"` validates a mutating job against the live state and answers its
// plan (steps, placement with ports, what would be removed) while committing nothing: the
// state, the job counter and the ports are the same before and after.

import { describe, expect, it } from 'vitest';
import { parseRequest } from '@kcm/protocol';
import { createParas, request, startHarness } from './grow-harness';

const snapshot = (s: object) => JSON.stringify(s);

describe('dry runs of create_cluster, add_shards and delete_cluster', () => {
  it('answer the plan and change nothing: state, job counter and ports stay as they were', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const before = { state: snapshot(h.store.s), jobs: h.jobCount(), ports: snapshot(h.store.s.ports) };

    const create = await h.manager.service.planJob!(request('create_cluster', { ...createParas({ nick_name: 'more' }), dry_run: '1' }));
    expect(create).toMatchObject({ dry_run: '1', job_type: 'create_cluster', steps: expect.arrayContaining(['plan placement', 'install storage nodes']), waits_behind: '0' });
    const placement = (create.plan as { placement: { shards: { master: { hostaddr: string; port: string } }[]; comps: unknown[] } }).placement;
    expect(placement.shards).toHaveLength(2);
    expect(placement.comps).toHaveLength(2);
    // Ports the real create would take now: free ones of the chosen hosts, not those in use.
    const inUse = new Set(Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes).map((n) => `${n.hostaddr}:${n.port}`)));
    for (const s of placement.shards) expect(inUse.has(`${s.master.hostaddr}:${s.master.port}`)).toBe(false);

    const add = await h.manager.service.planJob!(request('add_shards', { cluster_id: cluster.id, shards: '1', nodes: '3', storage_iplists: [], dry_run: '1' }));
    expect((add.plan as { placement: unknown[] }).placement).toHaveLength(1);

    const del = await h.manager.service.planJob!(request('delete_cluster', { cluster_id: cluster.id, dry_run: '1' }));
    const removes = (del.plan as { removes: { storage_nodes: unknown[]; comps: unknown[] } }).removes;
    expect(removes.storage_nodes).toHaveLength(6);
    expect(removes.comps).toHaveLength(2);

    expect({ state: snapshot(h.store.s), jobs: h.jobCount(), ports: snapshot(h.store.s.ports) }).toEqual(before);
    expect(h.calls).toEqual([]); // no agent was asked to do anything
  });

  it('refuse what a submission would refuse, with the same error naming the field', async () => {
    const h = await startHarness();
    await expect(h.manager.service.planJob!(request('add_shards', { cluster_id: '999', shards: '1', nodes: '3', storage_iplists: [], dry_run: '1' }))).rejects.toMatchObject({
      errorName: 'NOT_FOUND',
    });
  });

  it('dry_run must be "0" or "1"; sync jobs ignore it', () => {
    const parse = (jobType: string, paras: Record<string, unknown>) => parseRequest({ version: '1.0', job_type: jobType, timestamp: '1700000000', user_name: 't', paras });
    const bad = parse('delete_cluster', { cluster_id: '1', dry_run: 'yes' });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error.message).toBe('paras.dry_run: must be "0" or "1", got "yes"');
    const yes = parse('delete_cluster', { cluster_id: '1', dry_run: '1' });
    expect(yes.ok && yes.request.dryRun).toBe(true);
    const no = parse('delete_cluster', { cluster_id: '1', dry_run: '0' });
    expect(no.ok && no.request.dryRun).toBeFalsy();
    const query = parse('get_cluster_summary', { dry_run: '1' });
    expect(query.ok && query.request.dryRun).toBeFalsy();
  });
});

// Leader-only: keeps every compute node's catalog in step with the shards. Every 500 ms
// (a round whose shards did not change costs the agent two reads), for each ready cluster, it calls SyncCatalog on each compute node with every
// shard at its current master, so a table created on a shard
// master in database `D_$$_S` appears as `S.<table>` in database `D` on every compute node
// within seconds, disappears when dropped, and follows its shard's master after a failover.
// An unchanged catalog costs the agent only reads.

import { randomUUID } from 'node:crypto';
import type { Agents } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import { shardEndpoints } from '../jobs/instance-ops';
import type { ClusterRecord, CompRecord } from '../meta/state';
import type { MetaStore } from '../meta/store';
import { PeriodicRounds } from './periodic-rounds';
import type { SecretBox } from '../secrets/secret-box';

export const DEFAULT_CATALOG_SYNC_INTERVAL_MS = 500;

export interface CatalogSyncOptions {
  store: MetaStore;
  agents: Agents;
  logger: Logger;
  /** Opens the storage account's password the compute nodes' user mappings need. */
  secrets: SecretBox;
  intervalMs?: number;
}

export class CatalogSync {
  private readonly loop: PeriodicRounds;
  /** Last failure per compute node, so a node that stays broken is logged once, not every round. */
  private readonly lastProblem = new Map<string, string>();
  private rounds = 0;

  constructor(private readonly opts: CatalogSyncOptions) {
    this.loop = new PeriodicRounds(() => this.syncRound(), opts.intervalMs ?? DEFAULT_CATALOG_SYNC_INTERVAL_MS, { catchUp: true });
  }

  /** Rounds completed since this member became leader (for tests and logs). */
  get completedRounds(): number {
    return this.rounds;
  }

  start(): void {
    if (this.loop.started) return;
    this.rounds = 0;
    this.loop.start({ runAtOnce: false });
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round over every ready cluster; a round still running is joined, not doubled. */
  syncAll(): Promise<void> {
    return this.loop.run();
  }

  private async syncRound(): Promise<void> {
    const clusters = Object.values(this.opts.store.state().clusters).filter((c) => c.status === 'ready');
    await Promise.all(clusters.map((c) => this.syncCluster(c)));
    this.rounds++;
  }

  private async syncCluster(cluster: ClusterRecord): Promise<void> {
    const shards = shardEndpoints(this.opts.secrets, cluster);
    await Promise.all(Object.values(cluster.comps).map((comp) => this.syncComp(cluster, comp, shards)));
  }

  private async syncComp(cluster: ClusterRecord, comp: CompRecord, shards: ReturnType<typeof shardEndpoints>): Promise<void> {
    const key = `${cluster.id}/${comp.id}`;
    const log = this.opts.logger.child({ cluster: cluster.name, comp: comp.name });
    try {
      // A fresh op_id each round: this is a new reconciliation, not a retry of the last one.
      const reply = await this.opts.agents.postgres(comp.hostaddr).syncCatalog(`catalog:${cluster.id}:${comp.id}:${randomUUID()}`, comp.port, shards);
      const changed = reply.changes.filter((c) => c.action !== 'skipped');
      if (changed.length > 0 || reply.servers_changed.length > 0) {
        log.info(
          { changes: changed.map((c) => `${c.action} ${c.database}.${c.schema}.${c.table}`), servers_changed: reply.servers_changed, elapsed_ms: reply.elapsed_ms },
          'compute node catalog synced',
        );
      }
      const skipped = reply.changes.filter((c) => c.action === 'skipped').map((c) => `${c.shard_id}: ${c.reason}`).join('; ');
      this.noteProblem(key, skipped, log);
    } catch (err) {
      this.noteProblem(key, (err as Error).message, log);
    }
  }

  private noteProblem(key: string, problem: string, log: Logger): void {
    const before = this.lastProblem.get(key) ?? '';
    if (problem === before) return;
    if (problem) log.warn({ problem }, 'compute node catalog sync incomplete');
    else log.info('compute node catalog sync recovered');
    if (problem) this.lastProblem.set(key, problem);
    else this.lastProblem.delete(key);
  }
}

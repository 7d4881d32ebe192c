// Leader-only: continuous binlog archiving, what makes a point in time after the last full
// backup restorable. Every few seconds, for each shard of each ready cluster, the shard's
// master as the metadata names it now (so archiving follows a failover or a switchover)
// closes its current binlog when it holds new writes (FLUSH BINARY LOGS), and pushes every
// closed file the archive lacks to the cluster's backup storage, agent to agent. Each
// stored file is committed (BinlogArchived) with its GTID states and event times.
//
// The archive lag (RPO) of a shard is how far its archive trails the clock: now minus the
// last event time of its newest archived file. An idle master is still flushed every
// idleFlushMs, so the archive of a quiet shard keeps reaching the present.

import type { Logger } from '@kcm/common';
import { gtidCovers, type MariaDbBinlogFile, type MariaDbRestoreAgentClient } from '@kcm/agent-api';
import { storageAddress } from '../backup/storage';
import { newSealing, sealedRefOf } from '../backup/sealing';
import type { SecretBox } from '../secrets/secret-box';
import { orThrow } from '../jobs/framework/errors';
import { defaultBackupStorage } from '../meta/backup';
import { archiveCoversUntil, archivedUpTo, shardArchive } from '../meta/binlog-archive';
import { CommandKind } from '../meta/commands';
import type { BackupStorageRecord, ClusterRecord, ShardRecord } from '../meta/state';
import type { Clock, MetaStore } from '../meta/store';
import { PeriodicRounds } from './periodic-rounds';

export const DEFAULT_BINLOG_ARCHIVE_INTERVAL_MS = 5000;
export const DEFAULT_BINLOG_IDLE_FLUSH_MS = 60_000;

/** What the archiver asks of agents (the engine agents' pool, or a test's fake). */
export interface ArchiveAgents {
  mariadbRestore(hostaddr: string): Pick<MariaDbRestoreAgentClient, 'listBinlogs' | 'archiveBinlog'>;
}

export interface BinlogArchiverOptions {
  store: MetaStore;
  agents: ArchiveAgents;
  logger: Logger;
  now: Clock;
  /** Opens the storage's KEK to wrap each archived binlog's data key (docs/backup-encryption.md). */
  secrets: SecretBox;
  intervalMs?: number;
  /** A master with no new writes is flushed this often anyway, so its archive keeps up with the clock. */
  idleFlushMs?: number;
  /** Hears each shard's archive lag (s) after its round, for the metric's distribution. */
  onLag?: (lagSeconds: number) => void;
}

/**
 * The key of an archived binlog: per cluster, shard and the master (server_id) that wrote
 * it, and the file's first event time beside its name, since a master whose binlogs were
 * reset (a restored one) starts again at mariadb-bin.000001.
 */
export const archivedBinlogKey = (clusterId: string, shardId: string, serverId: number, file: Pick<MariaDbBinlogFile, 'name' | 'first_event_time'>): string =>
  `cluster_${clusterId}/binlogs/shard_${shardId}/${serverId}/${file.first_event_time}-${file.name}`;

export class BinlogArchiver {
  private readonly loop: PeriodicRounds;
  /** Per master (`host:port`): the open file right after its last flush, and when. */
  private readonly lastFlush = new Map<string, { name: string; size: number; atMs: number }>();
  private readonly lastProblem = new Map<string, string>();

  constructor(private readonly opts: BinlogArchiverOptions) {
    this.loop = new PeriodicRounds(() => this.archiveRound(), opts.intervalMs ?? DEFAULT_BINLOG_ARCHIVE_INTERVAL_MS);
  }

  start(): void {
    this.loop.start({ runAtOnce: false });
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round over every shard; joins a round under way. */
  archiveAll(): Promise<void> {
    return this.loop.run();
  }

  private async archiveRound(): Promise<void> {
    const state = this.opts.store.state();
    const storage = defaultBackupStorage(state);
    if (!storage) return; // nowhere to archive to until a backup storage is registered
    // A cluster being restored into has its binlogs reset by the restore: archived once it is done.
    const restoring = new Set(
      Object.values(state.runQueues).flatMap((queue) => queue.map((id) => state.jobs[id]).filter((j) => j?.jobType === 'cluster_restore').map((j) => String(j.paras.dst_cluster_id))),
    );
    // A restore drill's scratch cluster is nobody's data: it is deleted when the drill ends.
    const clusters = Object.values(state.clusters).filter((c) => c.status === 'ready' && !restoring.has(c.id) && !c.scratchOfDrill);
    await Promise.all(clusters.flatMap((c) => Object.values(c.shards).map((s) => this.archiveShard(c, s, storage))));
  }

  private async archiveShard(cluster: ClusterRecord, shard: ShardRecord, storage: BackupStorageRecord): Promise<void> {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) return;
    const key = `${cluster.id}/${shard.id}`;
    const log = this.opts.logger.child({ cluster: cluster.name, shard: shard.name, master: `${master.hostaddr}:${master.port}` });
    try {
      const files = await this.closedFiles(master.hostaddr, master.port);
      let archive = shardArchive(this.opts.store.state(), cluster.id, shard.id);
      for (const [i, file] of files.files.entries()) {
        if (!file.closed) continue;
        const endGtidState = files.files[i + 1]?.start_gtid_state ?? file.start_gtid_state;
        const objectKey = archivedBinlogKey(cluster.id, shard.id, files.server_id, file);
        if (archive?.files.some((f) => f.key === objectKey)) continue;
        // Older than the archive in both GTIDs and time: the old master's history as a new master replicated it.
        if (gtidCovers(archivedUpTo(archive), endGtidState) && file.last_event_time <= archiveCoversUntil(archive)) continue;
        // Encryption at rest: the master's agent seals the file with a data key of its own (docs/backup-encryption.md).
        const sealing = newSealing(this.opts.secrets, storage);
        const stored = await this.opts.agents.mariadbRestore(master.hostaddr).archiveBinlog({
          op_id: `archive:${objectKey}`,
          port: master.port,
          name: file.name,
          target: { storage_agent_address: storageAddress(storage), root: storage.path, key: objectKey, ...(sealing ? { data_key: sealing.dataKey } : {}) },
          ...(sealing ? { meta: sealing.meta } : {}),
        });
        // From what was stored: a retried archive answers with its first attempt's object and key.
        const sealed = sealedRefOf(stored.meta ?? {});
        if (sealing && !sealed.sealed) throw new Error(`${storage.name} encrypts, and the agent of ${master.hostaddr} stored ${objectKey} without sealing it (an agent from before encryption?)`);
        orThrow(
          await this.opts.store.propose({
            kind: CommandKind.BinlogArchived,
            at: this.opts.now(),
            clusterId: cluster.id,
            shardId: shard.id,
            file: {
              key: objectKey, storageName: storage.name, name: file.name, serverId: files.server_id, hostaddr: master.hostaddr, port: master.port,
              bytes: stored.bytes, sha256: stored.sha256, startGtidState: file.start_gtid_state, endGtidState,
              firstEventTime: file.first_event_time, lastEventTime: file.last_event_time, archivedAt: this.opts.now(), ...sealed,
            },
          }),
        );
        archive = shardArchive(this.opts.store.state(), cluster.id, shard.id);
      }
      if (archive?.files.length) this.opts.onLag?.(Math.max(0, this.opts.now() / 1000 - archiveCoversUntil(archive)));
      this.noteProblem(key, '', log);
    } catch (err) {
      this.noteProblem(key, err instanceof Error ? err.message : String(err), log);
    }
  }

  /**
   * The master's binlogs after closing the current one when it holds writes since the last
   * flush (its size grew), or when the last flush is idleFlushMs old.
   */
  private async closedFiles(hostaddr: string, port: number): Promise<{ files: MariaDbBinlogFile[]; server_id: number }> {
    const agent = this.opts.agents.mariadbRestore(hostaddr);
    const master = `${hostaddr}:${port}`;
    const listing = await agent.listBinlogs(port, false);
    const open = listing.files.at(-1);
    const last = this.lastFlush.get(master);
    const idle = last && open && last.name === open.name && last.size === open.size && this.opts.now() - last.atMs < (this.opts.idleFlushMs ?? DEFAULT_BINLOG_IDLE_FLUSH_MS);
    if (idle) return listing;
    const flushed = await agent.listBinlogs(port, true);
    const newOpen = flushed.files.at(-1);
    if (newOpen) this.lastFlush.set(master, { name: newOpen.name, size: newOpen.size, atMs: this.opts.now() });
    return flushed;
  }

  private noteProblem(key: string, problem: string, log: Logger): void {
    const before = this.lastProblem.get(key) ?? '';
    if (problem === before) return;
    if (problem) log.warn({ problem }, 'binlog archiving failed; retried next round');
    else if (before) log.info('binlog archiving recovered');
    if (problem) this.lastProblem.set(key, problem);
    else this.lastProblem.delete(key);
  }
}

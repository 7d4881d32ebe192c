// One logical backup: the object's tables are found on the shards that hold them (each
// shard master's agent names what a dump of the object would hold there), each such shard's
// part is dumped from its master (mariadb-dump --single-transaction) straight into backup
// storage, and the parts make the backup set. The location of a part is fixed by the run id
// and the shard, so a run taken over by a new leader overwrites whatever its predecessor
// left there.
//
// A table object may be a partitioned parent (it lives on the compute nodes only): the agent
// resolves it to the partitions each shard holds, with their COMMENTs recording the parent's
// key and each bound, so the set holds every partition wherever it lives. A run that finds
// nothing to store fails naming what it looked for; it never records an empty set.

import { KcmError, type ObjectType } from '@kcm/protocol';
import type { Logger } from '@kcm/common';
import type { Agents } from '@kcm/agent-api';
import type { LogicalBackupPart } from '../meta/logical-backup-records';
import type { ClusterRecord, MetaState, ShardRecord } from '../meta/state';
import { dumpRequestOf, objectNotFound } from './logical-objects';
import type { OpenLogicalStorage } from './logical-storage';

export interface LogicalBackupDeps {
  /** The agents; logical dumps through agents.mariadbLogical (a client per operation, closed after it). */
  agents: Agents;
  openStorage: OpenLogicalStorage;
  logger: Logger;
}

export interface LogicalObject {
  objectType: ObjectType;
  dbTable: string;
}

export const partLocation = (clusterId: string, runId: string, shardId: string): string => `logical/cluster_${clusterId}/run_${runId}/shard_${shardId}.sql`;

/** Shards sorted by id (numeric ids as numbers): a stable order for parts and for mapping them. */
export function shardsInOrder(cluster: ClusterRecord): ShardRecord[] {
  return Object.values(cluster.shards).sort((a, b) => Number(a.id) - Number(b.id) || a.id.localeCompare(b.id));
}

/**
 * The object's tables on each shard of the cluster that holds some (asked of each master's
 * agent: the same resolution its dump makes, partitions of a partitioned parent included).
 */
export async function shardsHolding(agents: Agents, cluster: ClusterRecord, object: LogicalObject): Promise<{ shard: ShardRecord; tables: string[] }[]> {
  const found: { shard: ShardRecord; tables: string[] }[] = [];
  for (const shard of shardsInOrder(cluster)) {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) continue;
    const client = agents.mariadbLogical(master.hostaddr);
    try {
      const tables = await client.tablesOf({ port: master.port, ...dumpRequestOf(object.objectType, object.dbTable) });
      if (tables.length > 0) found.push({ shard, tables });
    } finally {
      client.close();
    }
  }
  return found;
}

/** Dumps the object from every shard that holds it into storage; the parts of its backup set. */
export async function dumpLogicalObject(
  deps: LogicalBackupDeps,
  state: MetaState,
  cluster: ClusterRecord,
  object: LogicalObject,
  runId: string,
  signal: AbortSignal,
): Promise<LogicalBackupPart[]> {
  const holders = await shardsHolding(deps.agents, cluster, object);
  if (holders.length === 0) throw objectNotFound(cluster.id, object.objectType, object.dbTable);
  const storage = deps.openStorage(state);
  const parts: LogicalBackupPart[] = [];
  try {
    for (const { shard } of holders) {
      if (signal.aborted) throw new Error('logical backup stopped: this member is no longer the leader');
      const master = shard.nodes[shard.masterNodeId];
      const client = deps.agents.mariadbLogical(master.hostaddr);
      try {
        const dump = await client.dump({ port: master.port, ...dumpRequestOf(object.objectType, object.dbTable) });
        if (dump.tables.length === 0) {
          dump.cancel();
          throw KcmError.of('NOT_FOUND', `shard ${shard.id} of cluster ${cluster.id} named no table of ${object.objectType} ${object.dbTable} to dump; nothing is stored`);
        }
        const stop = () => dump.cancel();
        signal.addEventListener('abort', stop, { once: true });
        try {
          const location = partLocation(cluster.id, runId, shard.id);
          const stored = await storage.put(location, dump.data, { kind: 'logical', db_table: object.dbTable, shard_id: shard.id });
          parts.push({ shardId: shard.id, storage: storage.record.name, location, bytes: stored.bytes, sha256: stored.sha256, tables: dump.tables });
        } finally {
          signal.removeEventListener('abort', stop);
        }
      } finally {
        client.close();
      }
    }
  } finally {
    storage.close();
  }
  deps.logger.info({ cluster: cluster.id, object: `${object.objectType} ${object.dbTable}`, run: runId, parts: parts.map((p) => `${p.shardId}:${p.bytes}B`) }, 'logical backup stored');
  return parts;
}

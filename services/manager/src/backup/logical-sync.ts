// The last step of a logical restore: every compute node of the destination syncs its
// catalog from the shards now holding the restored tables, and each must have taken every
// one of them. A sync that answers but skipped a restored table (mysql_fdw did not import
// it, PostgreSQL refused its column attributes, or a partition could not be attached to its
// parent) leaves that compute node without it: the restore fails naming the node, the
// table and the reason, rather than answering done for a table some compute nodes lack.

import type { CatalogChange, Agents } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import { opId, shardEndpoints } from '../jobs/instance-ops';
import type { SecretBox } from '../secrets/secret-box';
import type { ClusterRecord } from '../meta/state';

/** A skipped change about one of `tables` (MariaDB names, `D_$$_S.T`), as `D_$$_S.T: reason`. */
export function skippedRestoredTables(changes: readonly CatalogChange[], tables: ReadonlySet<string>): string[] {
  return changes
    .filter((c) => c.action === 'skipped' && c.table !== '' && tables.has(`${c.database}_$$_${c.schema}.${c.table}`))
    .map((c) => `${c.database}_$$_${c.schema}.${c.table}: ${c.reason}`);
}

/** Syncs every compute node of `dst`; throws when one failed, or skipped any of `tables`. */
export async function syncRestoredCatalogs(agents: Agents, secrets: SecretBox, jobId: string, dst: ClusterRecord, tables: ReadonlySet<string>): Promise<void> {
  const comps = Object.values(dst.comps);
  const shards = shardEndpoints(secrets, dst);
  const settled = await Promise.allSettled(comps.map((comp) => agents.postgres(comp.hostaddr).syncCatalog(opId(jobId, 'logical-restore-sync', `comp-${comp.id}`), comp.port, shards)));
  const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [`${comps[i].name}: ${(s.reason as Error).message}`] : []));
  // The first failure is the cause: its agent error names the job's (stepFailureOf).
  const first = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (first) throw new Error(`catalog sync failed on ${failed.join('; ')}`, { cause: first.reason });
  const lacking = settled.flatMap((s, i) => (s.status === 'fulfilled' ? skippedRestoredTables(s.value.changes, tables).map((t) => `${comps[i].name} (${t})`) : []));
  if (lacking.length > 0) {
    throw KcmError.of('INSTANCE_FAILED', `the tables were restored on the shards, but compute node ${lacking.join('; ')} did not take them`);
  }
}

// Step 1 of repartition_tables: find each source and target table on its cluster's shards,
// read both definitions from the shard masters, and refuse before anything is copied if a
// rule of spec 4.5 is broken (rules.ts) or the target already holds rows (kcm copies into an
// empty pre-created table, so a failed job can leave it exactly as it was: empty).

import { MariaDbTablesAgentClient, type ProbeResult, type TableDescription } from '@kcm/agent-api';
import { KcmError, parseRepartitionPairs } from '@kcm/protocol';
import type { ClusterRecord, MetaState } from '../../meta/state';
import type { SecretBox } from '../../secrets/secret-box';
import type { EngineAgents } from '../instance-ops';
import { clusterStillThere } from '../cluster-lookup';
import { loginAs, q, withShard, type ShardLogin } from '../moves/shard-sql';
import { oneSourceDatabase, plannedProbes, probeViolations, refusalText, structureViolations, tableExists, type RepartitionTablePair, type RuleViolation, type TableName } from './rules';

/** Where each pair's tables live, found by the check step (the later steps read it). */
export interface LocatedPair {
  source: TableName & { shardId: string };
  target: TableName & { shardId: string };
}

export function pairsOf(repartitionTables: string): RepartitionTablePair[] {
  const parsed = parseRepartitionPairs(repartitionTables);
  if (!parsed.ok) throw KcmError.of('INVALID_PARAS', `paras.repartition_tables: ${parsed.rule}`, { field: 'paras.repartition_tables' });
  return parsed.value.map((p) => ({
    source: { database: `${p.source.database}_$$_${p.source.schema}`, table: p.source.table },
    target: { database: `${p.target.database}_$$_${p.target.schema}`, table: p.target.table },
  }));
}

export function masterLogin(secrets: SecretBox, cluster: ClusterRecord, shardId: string): ShardLogin {
  const shard = cluster.shards[shardId];
  const master = shard?.nodes[shard.masterNodeId];
  if (!master) throw KcmError.of('INSTANCE_FAILED', `shard ${shardId} of cluster ${cluster.id} has no master`);
  return loginAs(secrets, cluster, master, 'storage');
}

/** `database.table` -> the shards of the cluster whose master holds it. */
async function tablesByShard(agents: EngineAgents, cluster: ClusterRecord): Promise<Map<string, string[]>> {
  const where = new Map<string, string[]>();
  for (const shard of Object.values(cluster.shards)) {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) throw KcmError.of('INSTANCE_FAILED', `shard ${shard.id} of cluster ${cluster.id} has no master to read its tables from`);
    const { tables } = await agents.mariadb(master.hostaddr).listTables(master.port);
    for (const t of tables) where.set(t, [...(where.get(t) ?? []), shard.id]);
  }
  return where;
}

async function withTablesAgent<T>(agents: EngineAgents, cluster: ClusterRecord, shardId: string, work: (c: MariaDbTablesAgentClient, port: number) => Promise<T>): Promise<T> {
  const shard = cluster.shards[shardId];
  const master = shard.nodes[shard.masterNodeId];
  const client = new MariaDbTablesAgentClient(agents.agentAddress(master.hostaddr));
  try {
    return await work(client, master.port);
  } finally {
    client.close();
  }
}

const describe = (agents: EngineAgents, cluster: ClusterRecord, shardId: string, t: TableName): Promise<TableDescription | undefined> =>
  withTablesAgent(agents, cluster, shardId, async (c, port) => (await c.describeTables(port, [t])).tables[0]);

export interface CheckInputs {
  agents: EngineAgents;
  secrets: SecretBox;
  state: MetaState;
  srcClusterId: string;
  dstClusterId: string;
  repartitionTables: string;
}

/** Locates every table and checks rules 1-7; throws DATA_CHECK_FAILED naming each broken rule, table and column. */
export async function checkRepartition(i: CheckInputs): Promise<LocatedPair[]> {
  const pairs = pairsOf(i.repartitionTables);
  const src = clusterStillThere(i.state, i.srcClusterId);
  const dst = clusterStillThere(i.state, i.dstClusterId);
  const refuse = (violations: RuleViolation[]) => {
    if (violations.length > 0) throw KcmError.of('DATA_CHECK_FAILED', refusalText(violations));
  };
  refuse(oneSourceDatabase(pairs));
  const [srcTables, dstTables] = await Promise.all([tablesByShard(i.agents, src), src === dst ? undefined : tablesByShard(i.agents, dst)]);
  const shardsOf = (where: Map<string, string[]>, t: TableName) => where.get(`${t.database}.${t.table}`) ?? [];
  const located: LocatedPair[] = [];
  const violations: RuleViolation[] = [];
  const described: { pair: RepartitionTablePair; source: TableDescription; target: TableDescription }[] = [];
  for (const pair of pairs) {
    const srcShards = shardsOf(srcTables, pair.source);
    const dstShards = shardsOf(dstTables ?? srcTables, pair.target);
    const source = srcShards.length === 1 ? await describe(i.agents, src, srcShards[0], pair.source) : undefined;
    const target = dstShards.length === 1 ? await describe(i.agents, dst, dstShards[0], pair.target) : undefined;
    const missing = [
      ...tableExists(pair.source, 'source', `cluster ${src.id}`, source, srcShards.length),
      ...tableExists(pair.target, 'target', `cluster ${dst.id}`, target, dstShards.length),
    ];
    violations.push(...missing);
    if (missing.length > 0 || !source || !target) continue;
    violations.push(...structureViolations(pair, source, target));
    described.push({ pair, source, target });
    located.push({ source: { ...pair.source, shardId: srcShards[0] }, target: { ...pair.target, shardId: dstShards[0] } });
  }
  refuse(violations);
  // Rules 4 and 7 read the source rows: only once every definition is right.
  for (const [n, { pair, source, target }] of described.entries()) {
    const probes = plannedProbes(pair, source, target);
    if (probes.length === 0) continue;
    const results: ProbeResult[] = (
      await withTablesAgent(i.agents, src, located[n].source.shardId, (c, port) => c.probeRows(port, pair.source, probes.map((p) => p.probe)))
    ).results;
    violations.push(...probeViolations(pair, probes, results));
  }
  refuse(violations);
  for (const l of located) {
    const holdsRows = await withShard(masterLogin(i.secrets, dst, l.target.shardId), async (c) => {
      const [rows] = (await c.query(`SELECT 1 FROM ${q(l.target.database)}.${q(l.target.table)} LIMIT 1`)) as unknown as [unknown[]];
      return rows.length > 0;
    });
    if (holdsRows) {
      throw KcmError.of('CONFLICT', `target table ${l.target.database}.${l.target.table} already holds rows; repartition copies into an empty pre-created table, so that a failed job can leave it as it was`);
    }
  }
  return located;
}

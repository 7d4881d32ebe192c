// Step 1 of repartition_tables: find each source and target table on its cluster's shards,
// read both definitions from the shard masters, and refuse before anything is copied if a
// rule of spec 4.5 is broken (rules.ts) or the target already holds rows (kcm copies into an
// empty pre-created table, so a failed job can leave it exactly as it was: empty).

import { type ProbeResult, type TableDescription, type Agents, type MariaDbTablesAgentApi } from '@kcm/agent-api';
import { KcmError, parseRepartitionPairs } from '@kcm/protocol';
import type { ClusterRecord, MetaState } from '../../meta/state';
import type { SecretBox } from '../../secrets/secret-box';
import { clusterStillThere } from '../cluster-lookup';
import { loginAs, q, withShard, type ShardLogin } from '../moves/shard-sql';
import { partitionedParents, pieceTargets, piecesOf, type PartitionedParent, type RepartitionSide, type TablePiece } from './partitions';
import { oneSourceDatabase, plannedProbes, probeViolations, refusalText, structureViolations, tableExists, type RepartitionTablePair, type RuleViolation, type TableName } from './rules';

/** Where each pair's tables live, found by the check step (the later steps read it). */
export interface LocatedPair {
  /** A partitioned side's shardId is its first partition's. */
  source: TableName & { shardId: string };
  target: TableName & { shardId: string };
  /**
   * Set when a side is a partitioned table (partitions.ts): the copy moves each source piece
   * into the target piece `into` names, and the switch renames the parents on the compute nodes.
   */
  pieces?: PairPieces;
}

export interface PairPieces {
  source: { kind: 'plain' | 'partitioned'; pieces: TablePiece[] };
  target: { kind: 'plain' | 'partitioned'; pieces: TablePiece[] };
  /** For each source piece, the index of its target piece. */
  into: number[];
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
async function tablesByShard(agents: Agents, cluster: ClusterRecord): Promise<Map<string, string[]>> {
  const where = new Map<string, string[]>();
  for (const shard of Object.values(cluster.shards)) {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) throw KcmError.of('INSTANCE_FAILED', `shard ${shard.id} of cluster ${cluster.id} has no master to read its tables from`);
    const { tables } = await agents.mariadb(master.hostaddr).listTables(master.port);
    for (const t of tables) where.set(t, [...(where.get(t) ?? []), shard.id]);
  }
  return where;
}

async function withTablesAgent<T>(agents: Agents, cluster: ClusterRecord, shardId: string, work: (c: MariaDbTablesAgentApi, port: number) => Promise<T>): Promise<T> {
  const shard = cluster.shards[shardId];
  const master = shard.nodes[shard.masterNodeId];
  return work(agents.mariadbTables(master.hostaddr), master.port);
}

const describe = (agents: Agents, cluster: ClusterRecord, shardId: string, t: TableName): Promise<TableDescription | undefined> =>
  withTablesAgent(agents, cluster, shardId, async (c, port) => (await c.describeTables(port, [t])).tables[0]);

export interface CheckInputs {
  agents: Agents;
  secrets: SecretBox;
  state: MetaState;
  srcClusterId: string;
  dstClusterId: string;
  repartitionTables: string;
}

/** The partitioned parents of each database a pair names, read once per cluster and database. */
function parentsReader(agents: Agents, secrets: SecretBox, cluster: ClusterRecord): (mariaDb: string) => Promise<Map<string, PartitionedParent>> {
  const read = new Map<string, Promise<Map<string, PartitionedParent>>>();
  return (mariaDb) => {
    let found = read.get(mariaDb);
    if (!found) {
      found = partitionedParents(agents, Object.values(cluster.shards).map((sh) => ({ shardId: sh.id, login: masterLogin(secrets, cluster, sh.id) })), mariaDb);
      read.set(mariaDb, found);
    }
    return found;
  };
}

/** One side as the shards show it: a table on one shard, a partitioned parent (no shard table of that name), or neither. */
async function sideOf(where: Map<string, string[]>, parents: (mariaDb: string) => Promise<Map<string, PartitionedParent>>, t: TableName): Promise<{ side?: RepartitionSide; shards: number }> {
  const shards = where.get(`${t.database}.${t.table}`) ?? [];
  if (shards.length === 1) return { side: { kind: 'plain', piece: { table: t.table, shardId: shards[0], bound: '' } }, shards: 1 };
  if (shards.length > 1) return { shards: shards.length };
  const parent = (await parents(t.database)).get(t.table);
  return parent && parent.partitions.length > 0 ? { side: { kind: 'partitioned', parent }, shards: 1 } : { shards: 0 };
}

/** The table whose definition stands for a side: the table itself, or a partition of the parent (every partition has the parent's columns). */
const definingTable = (t: TableName, side: RepartitionSide): { at: TableName; shardId: string } =>
  side.kind === 'plain' ? { at: t, shardId: side.piece.shardId } : { at: { database: t.database, table: side.parent.partitions[0].table }, shardId: side.parent.partitions[0].shardId };

/** Refusals particular to a pair with a partitioned side (beyond rules 1-7, which apply to the parent as to a table). */
function partitionedPairViolations(pair: RepartitionTablePair, src: ClusterRecord, dst: ClusterRecord, source: RepartitionSide, target: RepartitionSide, sd: TableDescription, td: TableDescription): { violations: RuleViolation[]; into?: number[] } {
  const table = `${pair.target.database}.${pair.target.table}`;
  const refuse = (message: string) => ({ violations: [{ rule: 1 as const, table, column: '', message }] });
  if (src.id !== dst.id || pair.source.database !== pair.target.database) {
    return refuse(`${pair.source.database}.${pair.source.table} -> ${table}: a partitioned table is repartitioned within its own cluster and database (its parent lives on the compute nodes, where the switch renames it)`);
  }
  const mapped = pieceTargets(source, target, { source: `${pair.source.database}.${pair.source.table}`, target: table });
  if ('refusal' in mapped) return refuse(mapped.refusal);
  // PostgreSQL hashes each key column by its type: a hash layout carries over only for the same types.
  if (source.kind === 'partitioned' && target.kind === 'partitioned' && /^HASH/i.test(source.parent.key)) {
    const type = (d: TableDescription, c: string) => d.columns.find((x) => x.name.toLowerCase() === c)?.data_type.toLowerCase();
    const cols = /\((.*)\)/.exec(source.parent.key)?.[1].split(',').map((c) => c.trim().replace(/^"(.*)"$/, '$1').toLowerCase()) ?? [];
    const differ = cols.filter((c) => type(sd, c) !== type(td, c));
    if (differ.length > 0) return refuse(`hash partition key column ${differ.join(', ')} has another type in ${table}; PostgreSQL's partition hash differs by type, so rows would not land in the partition their bound says`);
  }
  return { violations: [], into: mapped.into };
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
  const [srcParents, dstParents] = [parentsReader(i.agents, i.secrets, src), src === dst ? undefined : parentsReader(i.agents, i.secrets, dst)];
  const located: LocatedPair[] = [];
  const violations: RuleViolation[] = [];
  const described: { pair: RepartitionTablePair; source: TableDescription; target: TableDescription; sourcePieces: TablePiece[] }[] = [];
  for (const pair of pairs) {
    const s = await sideOf(srcTables, srcParents, pair.source);
    const t = await sideOf(dstTables ?? srcTables, dstParents ?? srcParents, pair.target);
    const sDef = s.side && definingTable(pair.source, s.side);
    const tDef = t.side && definingTable(pair.target, t.side);
    const source = sDef ? await describe(i.agents, src, sDef.shardId, sDef.at) : undefined;
    const target = tDef ? await describe(i.agents, dst, tDef.shardId, tDef.at) : undefined;
    const missing = [...tableExists(pair.source, 'source', `cluster ${src.id}`, source, s.shards), ...tableExists(pair.target, 'target', `cluster ${dst.id}`, target, t.shards)];
    violations.push(...missing);
    if (missing.length > 0 || !source || !target || !s.side || !t.side) continue;
    const structure = structureViolations(pair, source, target);
    violations.push(...structure);
    const sourcePieces = piecesOf(s.side);
    const l: LocatedPair = { source: { ...pair.source, shardId: sourcePieces[0].shardId }, target: { ...pair.target, shardId: piecesOf(t.side)[0].shardId } };
    if (s.side.kind === 'partitioned' || t.side.kind === 'partitioned') {
      const p = partitionedPairViolations(pair, src, dst, s.side, t.side, source, target);
      violations.push(...p.violations);
      if (!p.into) continue;
      l.pieces = { source: { kind: s.side.kind, pieces: sourcePieces }, target: { kind: t.side.kind, pieces: piecesOf(t.side) }, into: p.into };
    }
    described.push({ pair, source, target, sourcePieces });
    located.push(l);
  }
  refuse(violations);
  // Rules 4 and 7 read the source rows: only once every definition is right; every partition of a partitioned source.
  for (const { pair, source, target, sourcePieces } of described) {
    const probes = plannedProbes(pair, source, target);
    if (probes.length === 0) continue;
    for (const piece of sourcePieces) {
      const at = { database: pair.source.database, table: piece.table };
      const results: ProbeResult[] = (await withTablesAgent(i.agents, src, piece.shardId, (c, port) => c.probeRows(port, at, probes.map((p) => p.probe)))).results;
      violations.push(...probeViolations(pair, probes, results));
    }
  }
  refuse(violations);
  for (const l of located) {
    for (const piece of l.pieces?.target.pieces ?? [{ table: l.target.table, shardId: l.target.shardId, bound: '' }]) {
      const holdsRows = await withShard(i.agents, masterLogin(i.secrets, dst, piece.shardId), async (c) => {
        const [rows] = (await c.query(`SELECT 1 FROM ${q(l.target.database)}.${q(piece.table)} LIMIT 1`)) as unknown as [unknown[]];
        return rows.length > 0;
      });
      if (holdsRows) {
        const what = piece.table === l.target.table ? '' : ` (partition ${piece.table})`;
        throw KcmError.of('CONFLICT', `target table ${l.target.database}.${l.target.table}${what} already holds rows; repartition copies into an empty pre-created table, so that a failed job can leave it as it was`);
      }
    }
  }
  return located;
}

// The MariaDbTablesAgent service (proto/agent-mariadb-tables.proto): what the manager reads
// about a storage node's tables to choose and check table moves. Reads only, as the
// agent's admin account over the instance's socket.
//
//   TableStats     information_schema.TABLES sizes + userstat's TABLE_STATISTICS counts
//   DescribeTables COLUMNS, STATISTICS (unique keys) and CHECK_CONSTRAINTS of named tables
//   ProbeRows      counts of a table's rows that would break given constraints, in one
//                  READ ONLY transaction (a check clause read from a catalog cannot write)

import type * as grpc from '@grpc/grpc-js';
import type { AgentContext, CapabilityModule } from '../../../capability';
import { unary } from '../../../grpc-unary';
import {
  AgentFailure,
  MariaDbTablesAgentService,
  type ColumnDefinition,
  type DescribeTablesReply,
  type DescribeTablesRequest,
  type ProbeResult,
  type ProbeRowsReply,
  type ProbeRowsRequest,
  type RowProbe,
  type TableDescription,
  type TableRef,
  type TableStatsReply,
  type TableStatsRequest,
} from '@kcm/agent-api';
import { checkPort, loadAdminAccount } from '../instance/instance-layout';
import { layoutOf } from '../instance/lifecycle';
import { withAdmin, type AdminSession } from '../instance/sql';

/** MariaDB names kcm moves: the same rule as logical dumps (logical-objects.ts). */
const IDENTIFIER = /^[A-Za-z0-9_$]{1,64}$/;
const MAX_CHECK_CLAUSE = 4096;
/** A probe scans a whole table; it must not run forever if the manager gave up. */
const PROBE_STATEMENT_SECONDS = 550;

function checkName(what: string, name: string): string {
  if (!IDENTIFIER.test(name)) throw new AgentFailure('invalid_argument', `${what} ${JSON.stringify(name)} is not a name kcm handles ([A-Za-z0-9_$], 1-64)`);
  return name;
}
const quoted = (name: string) => `\`${name}\``;

async function admin<T>(ctx: AgentContext, port: number, work: (s: AdminSession) => Promise<T>): Promise<T> {
  const layout = await layoutOf(ctx, checkPort(port));
  return withAdmin(layout, await loadAdminAccount(layout), [], work);
}

export async function tableStats(ctx: AgentContext, req: TableStatsRequest): Promise<TableStatsReply> {
  return admin(ctx, req.port, async (s) => {
    const [userstat] = await s.rows<{ v: string }>('read userstat', "SELECT @@GLOBAL.userstat AS v");
    const rows = await s.rows<{ db: string; name: string; data: string | null; idx: string | null; rows_read: string | null; rows_changed: string | null }>(
      'table stats',
      `SELECT t.TABLE_SCHEMA AS db, t.TABLE_NAME AS name, t.DATA_LENGTH AS data, t.INDEX_LENGTH AS idx,
              s.ROWS_READ AS rows_read, s.ROWS_CHANGED AS rows_changed
         FROM information_schema.TABLES t
         LEFT JOIN information_schema.TABLE_STATISTICS s ON s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME
        WHERE t.TABLE_SCHEMA LIKE '%\\_$$\\_%' AND t.TABLE_TYPE = 'BASE TABLE'
        ORDER BY 1, 2`,
    );
    return {
      userstat: String(userstat?.v) === '1' || String(userstat?.v).toUpperCase() === 'ON',
      tables: rows.map((r) => ({
        database: r.db,
        table: r.name,
        data_bytes: Number(r.data ?? 0),
        index_bytes: Number(r.idx ?? 0),
        rows_read: Number(r.rows_read ?? 0),
        rows_changed: Number(r.rows_changed ?? 0),
      })),
    };
  });
}

type ColumnRow = {
  name: string; ordinal: string; column_type: string; data_type: string; nullable: string; col_default: string | null;
  charset: string | null; char_len: string | null; num_prec: string | null; num_scale: string | null; dt_prec: string | null; extra: string;
};

async function describeOne(s: AdminSession, ref: TableRef): Promise<TableDescription> {
  const key = [checkName('database', ref.database), checkName('table', ref.table)];
  const [table] = await s.rows<{ type: string }>('table kind', 'SELECT TABLE_TYPE AS type FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', key);
  if (!table) return { database: ref.database, table: ref.table, exists: false, table_type: '', columns: [], unique_keys: [], checks: [] };
  const columns = await s.rows<ColumnRow>(
    'columns',
    `SELECT COLUMN_NAME AS name, ORDINAL_POSITION AS ordinal, COLUMN_TYPE AS column_type, DATA_TYPE AS data_type, IS_NULLABLE AS nullable,
            COLUMN_DEFAULT AS col_default, CHARACTER_SET_NAME AS charset, CHARACTER_MAXIMUM_LENGTH AS char_len,
            NUMERIC_PRECISION AS num_prec, NUMERIC_SCALE AS num_scale, DATETIME_PRECISION AS dt_prec, EXTRA AS extra
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
    key,
  );
  const keyParts = await s.rows<{ idx: string; col: string }>(
    'unique keys',
    'SELECT INDEX_NAME AS idx, COLUMN_NAME AS col FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX',
    key,
  );
  const checks = await s.rows<{ name: string; clause: string }>(
    'check constraints',
    'SELECT CONSTRAINT_NAME AS name, CHECK_CLAUSE AS clause FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ? ORDER BY 1',
    key,
  );
  const keys = new Map<string, string[]>();
  for (const part of keyParts) keys.set(part.idx, [...(keys.get(part.idx) ?? []), part.col]);
  return {
    database: ref.database,
    table: ref.table,
    exists: true,
    table_type: table.type,
    columns: columns.map((c): ColumnDefinition => ({
      name: c.name,
      ordinal: Number(c.ordinal),
      column_type: c.column_type,
      data_type: c.data_type,
      nullable: c.nullable === 'YES',
      // COLUMN_DEFAULT is the text 'NULL' for DEFAULT NULL and SQL NULL for no default.
      has_default: (c.col_default !== null && c.col_default !== 'NULL') || /auto_increment|GENERATED|VIRTUAL|PERSISTENT|STORED/i.test(c.extra),
      character_set: c.charset ?? '',
      char_max_length: Number(c.char_len ?? 0),
      numeric_precision: Number(c.num_prec ?? 0),
      numeric_scale: Number(c.num_scale ?? 0),
      datetime_precision: Number(c.dt_prec ?? 0),
      extra: c.extra ?? '',
    })),
    unique_keys: [...keys].map(([name, cols]) => ({ name, columns: cols })),
    checks,
  };
}

export async function describeTables(ctx: AgentContext, req: DescribeTablesRequest): Promise<DescribeTablesReply> {
  return admin(ctx, req.port, async (s) => {
    const tables: TableDescription[] = [];
    for (const ref of req.tables) tables.push(await describeOne(s, ref));
    return { tables };
  });
}

/** The one statement of a probe: its violation count and one example, as text. */
function probeStatement(from: string, p: RowProbe): string {
  if (p.null_column) {
    const col = quoted(checkName('column', p.null_column));
    return `SELECT COUNT(*) AS n, '' AS example FROM ${from} WHERE ${col} IS NULL`;
  }
  if (p.duplicate_columns.length > 0) {
    const cols = p.duplicate_columns.map((c) => quoted(checkName('column', c)));
    const notNull = cols.map((c) => `${c} IS NOT NULL`).join(' AND ');
    return `SELECT COUNT(*) AS n, MIN(k) AS example FROM (SELECT CONCAT_WS(',', ${cols.join(', ')}) AS k FROM ${from} WHERE ${notNull} GROUP BY ${cols.join(', ')} HAVING COUNT(*) > 1) d`;
  }
  if (p.false_check) {
    if (p.false_check.length > MAX_CHECK_CLAUSE) throw new AgentFailure('invalid_argument', `a check clause is longer than ${MAX_CHECK_CLAUSE} characters`);
    // A check passes when its clause is true or NULL; only FALSE breaks it.
    return `SELECT COUNT(*) AS n, '' AS example FROM ${from} WHERE (${p.false_check}) = FALSE`;
  }
  throw new AgentFailure('invalid_argument', 'a row probe must set null_column, duplicate_columns or false_check');
}

export async function probeRows(ctx: AgentContext, req: ProbeRowsRequest): Promise<ProbeRowsReply> {
  if (!req.table) throw new AgentFailure('invalid_argument', 'table is required');
  const from = `${quoted(checkName('database', req.table.database))}.${quoted(checkName('table', req.table.table))}`;
  const statements = req.probes.map((p) => probeStatement(from, p));
  return admin(ctx, req.port, async (s) => {
    await s.run('bound probe time', `SET SESSION max_statement_time = ${PROBE_STATEMENT_SECONDS}`);
    await s.run('read only', 'START TRANSACTION READ ONLY');
    try {
      const results: ProbeResult[] = [];
      for (const [i, sql] of statements.entries()) {
        const [row] = await s.rows<{ n: string; example: string | null }>(`probe ${i + 1}`, sql);
        results.push({ violations: Number(row?.n ?? 0), example: row?.example ?? '' });
      }
      return { results };
    } finally {
      await s.run('end read only', 'ROLLBACK').catch(() => {});
    }
  });
}

export const mariadbTablesModule: CapabilityModule = {
  name: 'mariadb-tables',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'mariadb-tables' });
    const logged = { ...ctx, logger: log };
    server.addService(MariaDbTablesAgentService.service, {
      TableStats: unary(log, 'MariaDbTables.TableStats', (req: TableStatsRequest) => tableStats(logged, req)),
      DescribeTables: unary(log, 'MariaDbTables.DescribeTables', (req: DescribeTablesRequest) => describeTables(logged, req)),
      ProbeRows: unary(log, 'MariaDbTables.ProbeRows', (req: ProbeRowsRequest) => probeRows(logged, req)),
    });
  },
};

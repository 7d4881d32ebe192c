// The statements that move a foreign table to another foreign server. PostgreSQL cannot
// change a foreign table's server, so a new one is made under a temporary name with the
// same columns (types, NOT NULL, defaults, column options), table options, comment (catalog
// sync's signature), owner and grants, the old one is dropped and the new one takes its
// name, all inside the caller's transaction: a statement waiting on the old table's lock
// looks the name up again once it gets the lock and finds the new table. A hold makes the
// replacement before it asks for its lock (same transaction, so nothing of it outlives a
// rollback or a crash) and leaves only the swap for the blocked window.
//
// A partition (a foreign table attached to a partitioned parent, kcm's way of spreading a
// table over shards) is swapped the same way, with the parent's part added under the lock:
// the parent's INSERT routing rule names the old partition (kcm_ddl.route_rows), so the
// rule goes first, then the old partition is detached and dropped, the replacement takes
// its name and is attached with the same bound, and route_rows makes the rule again. The
// hold locks the parent first (see index.ts), so nothing reaches the parent in between.

import { ident, literal } from '../postgres/admin-session';

export interface ForeignTableShape {
  schema: string;
  table: string;
  server: string;
  /** `key=value` as pg_foreign_table.ftoptions holds them. */
  options: string[];
  owner: string;
  comment: string | null;
  /** The partitioned table it is a partition of (regclass text, quoted as SQL needs it), and its bound (`FOR VALUES ...`). */
  partitionOf: string | null;
  bound: string | null;
  columns: { name: string; type: string; notNull: boolean; default: string | null; options: string[] }[];
  grants: { grantee: string; privilege: string }[];
}

function optionList(options: string[]): string {
  return options
    .map((o) => {
      const eq = o.indexOf('=');
      return `${ident(o.slice(0, eq))} ${literal(o.slice(eq + 1))}`;
    })
    .join(', ');
}

const tempName = (shape: ForeignTableShape) => `${shape.table.slice(0, 40)}__kcm_move`;
const qualified = (shape: ForeignTableShape, t: string) => `${ident(shape.schema)}.${ident(t)}`;

/** The whole re-point: the replacement under its temporary name, then the swap. */
export function foreignTableStatements(shape: ForeignTableShape, server: string): string[] {
  return [...replacementStatements(shape, server), ...swapStatements(shape)];
}

/** The old table dropped and the replacement given its name: all a hold that prepared the replacement has left to do. */
export function swapStatements(shape: ForeignTableShape): string[] {
  const old = qualified(shape, shape.table);
  const rename = `ALTER FOREIGN TABLE ${qualified(shape, tempName(shape))} RENAME TO ${ident(shape.table)}`;
  if (!shape.partitionOf) return [`DROP FOREIGN TABLE ${old}`, rename];
  const parent = shape.partitionOf;
  return [
    `DROP RULE IF EXISTS kcm_route_insert ON ${parent}`,
    `ALTER TABLE ${parent} DETACH PARTITION ${old}`,
    `DROP FOREIGN TABLE ${old}`,
    rename,
    `ALTER TABLE ${parent} ATTACH PARTITION ${old} ${shape.bound}`,
    `SELECT kcm_ddl.route_rows(${literal(parent)}::regclass)`,
  ];
}

/** A prepared replacement that will not be used (the table changed, or another server was asked for). */
export function dropReplacementStatement(shape: ForeignTableShape): string {
  return `DROP FOREIGN TABLE IF EXISTS ${qualified(shape, tempName(shape))}`;
}

/** The replacement on `server`, under the temporary name: it takes no lock on the table it will replace. */
export function replacementStatements(shape: ForeignTableShape, server: string): string[] {
  if (shape.partitionOf && !shape.bound?.startsWith('FOR VALUES ')) throw new Error(`${shape.schema}.${shape.table} is a partition of ${shape.partitionOf} with bound ${JSON.stringify(shape.bound)}; kcm re-attaches only FOR VALUES bounds (a DEFAULT partition is not supported)`);
  const temp = tempName(shape);
  const q = (t: string) => qualified(shape, t);
  const columns = shape.columns.map((c) =>
    [ident(c.name), c.type, c.options.length > 0 ? `OPTIONS (${optionList(c.options)})` : '', c.notNull ? 'NOT NULL' : '', c.default !== null ? `DEFAULT ${c.default}` : '']
      .filter(Boolean)
      .join(' '),
  );
  const sql = [
    `DROP FOREIGN TABLE IF EXISTS ${q(temp)}`,
    `CREATE FOREIGN TABLE ${q(temp)} (${columns.join(', ')}) SERVER ${ident(server)}${shape.options.length > 0 ? ` OPTIONS (${optionList(shape.options)})` : ''}`,
    `ALTER FOREIGN TABLE ${q(temp)} OWNER TO ${ident(shape.owner)}`,
  ];
  if (shape.comment !== null) sql.push(`COMMENT ON FOREIGN TABLE ${q(temp)} IS ${literal(shape.comment)}`);
  for (const g of shape.grants) sql.push(`GRANT ${g.privilege} ON ${q(temp)} TO ${g.grantee === 'PUBLIC' ? 'PUBLIC' : ident(g.grantee)}`);
  return sql;
}

/** A replacement a hold made before its lock: its server and the definition it copies. */
export interface PreparedReplacement {
  server: string;
  from: ForeignTableShape;
}

const sameShape = (a: ForeignTableShape, b: ForeignTableShape) => JSON.stringify(a) === JSON.stringify(b);

/**
 * What a re-point to `server` runs under the lock, `shape` being the definition read there:
 * only the swap when the prepared replacement is on that server and copies that definition;
 * otherwise the unused replacement goes and the whole re-point is made under the lock.
 */
export function repointStatements(shape: ForeignTableShape, server: string, prepared: PreparedReplacement | null): string[] {
  if (prepared && prepared.server === server && sameShape(prepared.from, shape)) return swapStatements(shape);
  const unused = prepared ? [dropReplacementStatement(prepared.from)] : [];
  return shape.server === server ? unused : [...unused, ...foreignTableStatements(shape, server)];
}

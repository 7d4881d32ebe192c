// The statements that move a foreign table to another foreign server. PostgreSQL cannot
// change a foreign table's server, so a new one is made under a temporary name with the
// same columns (types, NOT NULL, defaults, column options), table options, comment (catalog
// sync's signature), owner and grants, the old one is dropped and the new one takes its
// name, all inside the caller's transaction: a statement waiting on the old table's lock
// looks the name up again once it gets the lock and finds the new table.

import { ident, literal } from '../postgres/admin-session';

export interface ForeignTableShape {
  schema: string;
  table: string;
  server: string;
  /** `key=value` as pg_foreign_table.ftoptions holds them. */
  options: string[];
  owner: string;
  comment: string | null;
  /** The partitioned table it is a partition of (not supported by a move). */
  partitionOf: string | null;
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

export function foreignTableStatements(shape: ForeignTableShape, server: string): string[] {
  if (shape.partitionOf) throw new Error(`${shape.schema}.${shape.table} is a partition of ${shape.partitionOf}; moving a partition is not supported`);
  const temp = `${shape.table.slice(0, 40)}__kcm_move`;
  const q = (t: string) => `${ident(shape.schema)}.${ident(t)}`;
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
  sql.push(`DROP FOREIGN TABLE ${q(shape.table)}`, `ALTER FOREIGN TABLE ${q(temp)} RENAME TO ${ident(shape.table)}`);
  return sql;
}

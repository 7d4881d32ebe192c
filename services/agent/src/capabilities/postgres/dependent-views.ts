// Views over foreign tables the catalog sync drops or re-imports. PostgreSQL refuses to drop
// a table a view reads, so one view on a compute node (a user's, or one a cluster_restore
// put back) would fail the sync's transaction for its database every round from the first
// ALTER TABLE through another compute node on. The sync keeps their definitions aside,
// drops the tables with them, and makes them again once the tables are back, in the same
// transaction; a view the new table cannot serve (it read a column that is gone) is not
// made again, and the sync says so with its definition.

import type { CatalogChange } from '@kcm/agent-api';
import { ident, literal, trySavepoint, type AdminClient } from './admin-session';

export interface SavedView {
  schema: string;
  name: string;
  materialized: boolean;
  definition: string;
  owner: string;
  comment: string | null;
}

/** Every view reading one of `tables`, directly or through other views, in an order that can make them again. */
export async function viewsDependingOn(db: AdminClient, tables: readonly { schema: string; table: string }[]): Promise<SavedView[]> {
  if (tables.length === 0) return [];
  const names = tables.map((t) => `${ident(t.schema)}.${ident(t.table)}`);
  const found = await db.query<{ schema: string; name: string; kind: string; definition: string; owner: string; comment: string | null; depth: number }>(
    `WITH RECURSIVE readers(oid, depth) AS (
       SELECT r.ev_class, 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.refobjid = ANY (SELECT to_regclass(n) FROM unnest($1::text[]) AS n) AND r.ev_class <> d.refobjid
       UNION
       SELECT r.ev_class, readers.depth + 1 FROM readers
         JOIN pg_depend d ON d.refobjid = readers.oid AND d.refclassid = 'pg_class'::regclass AND d.classid = 'pg_rewrite'::regclass
         JOIN pg_rewrite r ON r.oid = d.objid AND r.ev_class <> readers.oid
     )
     SELECT n.nspname AS schema, c.relname AS name, c.relkind::text AS kind, pg_get_viewdef(c.oid) AS definition,
            pg_get_userbyid(c.relowner) AS owner, obj_description(c.oid, 'pg_class') AS comment, max(readers.depth) AS depth
       FROM readers JOIN pg_class c ON c.oid = readers.oid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('v', 'm')
      GROUP BY c.oid, n.nspname, c.relname, c.relkind, c.relowner
      ORDER BY max(readers.depth), n.nspname, c.relname`,
    [names],
  );
  return found.rows.map((r) => ({ schema: r.schema, name: r.name, materialized: r.kind === 'm', definition: r.definition, owner: r.owner, comment: r.comment }));
}

/** Makes the views again, each in a savepoint; those refused come back as 'skipped' changes naming why and what they were. */
export async function recreateViews(db: AdminClient, views: readonly SavedView[]): Promise<CatalogChange[]> {
  const refused: CatalogChange[] = [];
  for (const v of views) {
    const name = `${ident(v.schema)}.${ident(v.name)}`;
    const kind = v.materialized ? 'MATERIALIZED VIEW' : 'VIEW';
    const definition = v.definition.trim().replace(/;$/, '');
    const err = await trySavepoint(db, [
      `CREATE ${kind} ${name} AS ${definition}`,
      `ALTER ${kind} ${name} OWNER TO ${ident(v.owner)}`,
      ...(v.comment === null ? [] : [`COMMENT ON ${kind} ${name} IS ${literal(v.comment)}`]),
    ]);
    if (err) {
      refused.push({
        database: '', schema: v.schema, table: v.name, action: 'skipped', shard_id: '',
        reason: `view not made again over the re-imported table: ${err.message}; it was: ${definition}`,
      });
    }
  }
  return refused;
}

// DDL through compute nodes (README "SQL through compute nodes"): the kcm_ddl extension
// (services/agent/pg-ext/kcm_ddl, built and installed by scripts/setup.sh) carries CREATE,
// DROP and ALTER TABLE issued on a compute node to the shards inside the statement. Its C
// part must be preloaded; its event triggers live in each database. A host without the
// extension still runs compute nodes, with DDL through them refused by PostgreSQL as before.

import { access } from 'node:fs/promises';
import path from 'node:path';
import type { AdminClient } from './admin-session';

export const DDL_EXTENSION = 'kcm_ddl';

/** True when the extension's library is installed next to this PostgreSQL's binaries. */
export async function ddlHooksAvailable(binDir: string): Promise<boolean> {
  return access(path.join(binDir, '..', 'lib', `${DDL_EXTENSION}.so`)).then(
    () => true,
    () => false,
  );
}

/** Creates the extension in this database unless it is there (plpython3u comes with it). */
export async function ensureDdlHooks(db: AdminClient): Promise<boolean> {
  const found = await db.query(`SELECT 1 FROM pg_extension WHERE extname = $1`, [DDL_EXTENSION]);
  if ((found.rowCount ?? 0) > 0) return false;
  await db.query(`CREATE EXTENSION IF NOT EXISTS ${DDL_EXTENSION} CASCADE`);
  return true;
}

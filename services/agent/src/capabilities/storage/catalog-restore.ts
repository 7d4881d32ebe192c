// RestorePgSchema: the compute catalog part of a cluster restore. The objects of a stored
// schema dump that only a compute node holds (views, functions, types, sequences: see
// catalog-entries.ts) are put back into a destination compute instance with pg_restore,
// after the catalog sync has made its tables from the restored shards. They are created
// as the cluster's compute account (SET ROLE), so it owns them as it owned the originals;
// an object of the same name is replaced (a resumed restore runs this again); and all of a
// database's objects go in one transaction, so a failure leaves none of them.

import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure, type PgSchemaRestoreReply, type PgSchemaRestoreRequest } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import { exec } from '../../ops/exec';
import { withAdmin } from '../postgres/admin-session';
import { isIdentifier } from '../postgres/layout';
import { computeOnlyEntries } from './catalog-entries';
import { adminConnection, CATALOG_TOOL_TIMEOUT_MS, computeInstance, pgTool, withScratchDir } from './catalog-tools';

export async function restorePgSchema(ctx: AgentContext, req: PgSchemaRestoreRequest): Promise<PgSchemaRestoreReply> {
  const instance = await computeInstance(ctx, req.port);
  // Both go into a tool's argv: plain identifiers only, as kcm makes them.
  if (!isIdentifier(req.database)) throw new AgentFailure('invalid_argument', `database ${JSON.stringify(req.database)} is not a plain identifier`);
  if (!isIdentifier(req.role)) throw new AgentFailure('invalid_argument', `role ${JSON.stringify(req.role)} is not a plain identifier`);
  if (!req.dump?.length) throw new AgentFailure('invalid_argument', 'dump is empty');
  const exists = await withAdmin(instance, 'postgres', async (c) => (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [req.database])).rowCount === 1);
  if (!exists) return { objects: [], database_missing: true };

  const pgRestore = await pgTool(ctx, instance, 'pg_restore');
  return withScratchDir('kcm-catalog-restore-', async (dir) => {
    const dumpFile = path.join(dir, 'catalog.pgdump');
    await writeFile(dumpFile, req.dump, { mode: 0o600 });
    const listing = await exec(pgRestore, ['--list', dumpFile], { timeoutMs: CATALOG_TOOL_TIMEOUT_MS }).catch((err: Error) => {
      throw new AgentFailure('invalid_argument', `the dump of database ${req.database} is not a pg_dump custom-format archive: ${err.message}`, { cause: err });
    });
    const selection = computeOnlyEntries(listing.stdout);
    if (selection.objects.length === 0) return { objects: [], database_missing: false };
    const listFile = path.join(dir, 'use.list');
    await writeFile(listFile, selection.useList, { mode: 0o600 });
    await exec(pgRestore, [
      `--use-list=${listFile}`, '--schema-only', '--no-owner', '--no-acl', `--role=${req.role}`, '--clean', '--if-exists',
      '--single-transaction', '--exit-on-error', ...adminConnection(instance, req.database), dumpFile,
    ], { timeoutMs: CATALOG_TOOL_TIMEOUT_MS });
    ctx.logger.info({ port: req.port, database: req.database, role: req.role, objects: selection.objects }, 'compute catalog restored');
    return { objects: selection.objects, database_missing: false };
  });
}

// Tables an instance holds in the cluster databases: `D_$$_S` is the MariaDB name of
// PostgreSQL database D, schema S (what compute nodes route to); system schemas never match.

import type { AgentContext } from '../../../capability';
import { checkPort, loadAdminAccount } from './instance-layout';
import { layoutOf } from './lifecycle';
import type { MariaDbListTablesReply, MariaDbListTablesRequest } from '@kcm/agent-api';
import { withAdmin } from './sql';

export async function listClusterTables(ctx: AgentContext, req: MariaDbListTablesRequest): Promise<MariaDbListTablesReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const rows = await withAdmin(layout, await loadAdminAccount(layout), [], (s) =>
    s.rows<{ db: string; name: string }>(
      'list tables',
      "SELECT TABLE_SCHEMA AS db, TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE '%\\_$$\\_%' ORDER BY 1, 2",
    ),
  );
  return { tables: rows.map((r) => `${r.db}.${r.name}`) };
}

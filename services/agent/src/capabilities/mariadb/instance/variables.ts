// Instance variables: SHOW GLOBAL VARIABLES, all or the names asked for.

import type { AgentContext } from '../../../capability';
import { checkPort, loadAdminAccount } from './instance-layout';
import { layoutOf } from './lifecycle';
import type { MariaDbVariablesReply, MariaDbVariablesRequest } from '@kcm/agent-api';
import { withAdmin } from './sql';

const VARIABLE_NAME = /^[A-Za-z0-9_]{1,64}$/;

export async function readVariables(ctx: AgentContext, req: MariaDbVariablesRequest): Promise<MariaDbVariablesReply> {
  for (const name of req.names) if (!VARIABLE_NAME.test(name)) throw new Error(`variable name ${JSON.stringify(name)} must match ${VARIABLE_NAME}`);
  const layout = await layoutOf(ctx, checkPort(req.port));
  const rows = await withAdmin(layout, await loadAdminAccount(layout), [], (s) =>
    req.names.length
      ? s.rows<{ Variable_name: string; Value: string }>('show variables', 'SHOW GLOBAL VARIABLES WHERE Variable_name IN (?)', [req.names])
      : s.rows<{ Variable_name: string; Value: string }>('show variables', 'SHOW GLOBAL VARIABLES'),
  );
  return { variables: rows.map((r) => ({ name: r.Variable_name, value: String(r.Value ?? '') })) };
}

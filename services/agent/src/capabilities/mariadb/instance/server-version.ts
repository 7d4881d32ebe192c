// The version a running MariaDB reports, as kcm records it ("10.11.18").

import { reportedVersion } from '../../engines/engine-versions';
import type { AdminSession } from './sql';

export async function serverVersionOf(session: Pick<AdminSession, 'rows'>): Promise<string> {
  const [row] = await session.rows<{ version: string }>('read the server version', 'SELECT VERSION() AS version');
  return reportedVersion(String(row?.version ?? ''));
}

// Semi-synchronous replication as fullsync_level asks. MariaDB's semi-sync is built in
// (no plugin to load in 10.11). The master side is enabled only on the shard's master:
// enabled on a standby it makes every transaction there wait rpl_semi_sync_master_timeout
// (5 s) for acks no one sends. MariaDB waits for one standby's ack per transaction, so any
// fullsync_level >= 1 means "one standby has it before the commit returns".

import { chmod, chown, rename, writeFile } from 'node:fs/promises';
import { mysqlUser, type InstanceLayout } from './instance-layout';
import { renderRoleCnf } from './my-cnf';
import type { MariaDbRole } from '@kcm/agent-api';
import type { AdminSession } from './sql';

export interface SemiSyncSides {
  semi_sync_master: boolean;
  semi_sync_slave: boolean;
}

export function semiSyncSides(role: MariaDbRole, fullsyncLevel: number): SemiSyncSides {
  return { semi_sync_master: role === 'master' && fullsyncLevel > 0, semi_sync_slave: role === 'standby' && fullsyncLevel > 0 };
}

/** Sets both sides live. A standby's IO thread reads the slave side when it starts: restart it after. */
export async function applySemiSync(s: AdminSession, role: MariaDbRole, fullsyncLevel: number): Promise<SemiSyncSides> {
  const sides = semiSyncSides(role, fullsyncLevel);
  await s.run('set semi-sync master side', `SET GLOBAL rpl_semi_sync_master_enabled = ${sides.semi_sync_master ? 'ON' : 'OFF'}`);
  await s.run('set semi-sync slave side', `SET GLOBAL rpl_semi_sync_slave_enabled = ${sides.semi_sync_slave ? 'ON' : 'OFF'}`);
  return sides;
}

/** Keeps the role's settings for the next start (my.cnf includes this file). */
export async function persistRole(layout: InstanceLayout, role: MariaDbRole, fullsyncLevel: number): Promise<void> {
  await writeFile(`${layout.roleCnf}.tmp`, renderRoleCnf(role, fullsyncLevel), { mode: 0o640 });
  await chown(`${layout.roleCnf}.tmp`, 0, mysqlUser().gid);
  await chmod(`${layout.roleCnf}.tmp`, 0o640); // the agent's umask (077) would leave mysqld unable to read it
  await rename(`${layout.roleCnf}.tmp`, layout.roleCnf);
}

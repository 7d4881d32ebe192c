// Which MariaDB engine an instance runs: the version in its record (spec.engine_version),
// resolved to that version's directory in the agent's engine cache. Start, restart by the
// supervisor, backups (mariabackup must match the server that wrote the data), rebuilds and
// restores all take the engine from here, so an instance never changes version except
// through UpgradeEngine. A record an older agent wrote names no version: the system's.

import type { MariaDbInstanceSpec } from '@kcm/agent-api';
import type { AgentContext } from '../../../capability';
import type { MariaDbEngine } from '../../engines/engine-paths';
import { loadRecord, requireRecord } from './instance-layout';

/** The engine of the instance on `port` (which must be installed). */
export async function engineOf(ctx: AgentContext, port: number): Promise<MariaDbEngine> {
  return ctx.engines.mariadb((await requireRecord(ctx.stateDir, port)).spec.engine_version);
}

/**
 * The version a command that (re)creates an instance's files gives it: the one it names,
 * else the one it runs already (a rebuild keeps it), else the agent's default. The engine
 * is fetched here, before anything is written, so a version that cannot be had changes nothing.
 */
export async function chooseEngineVersion(ctx: AgentContext, spec: MariaDbInstanceSpec): Promise<string> {
  const version = spec.engine_version || (await loadRecord(ctx.stateDir, spec.port))?.spec.engine_version || (await ctx.engines.defaultVersion('mariadb'));
  await ctx.engines.mariadb(version);
  return version;
}

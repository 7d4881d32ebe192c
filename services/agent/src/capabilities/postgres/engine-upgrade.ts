// UpgradePostgresEngine: moves one compute instance to another minor version of its
// PostgreSQL major (docs/engine-versions.md). Minor versions share the data directory
// format, so it is a fast shutdown, the record switched, and a start from the new
// version's directory; a major upgrade (pg_upgrade) is not offered.
//
// Runs under the instance's lock (index.ts), which the supervisor's restarts also take. A
// re-run after the agent died part-way continues from the record, and the version measured
// before the first attempt is kept there so the reply still says where it came from.

import { AgentFailure, type UpgradePostgresEngineReply, type UpgradePostgresEngineRequest } from '@kcm/agent-api';
import { postgresMajor, versionFormatProblem } from '../engines/engine-versions';
import { validatePort } from './layout';
import { postgresServerVersion, startPostgres, stopPostgres, type PostgresHost } from './lifecycle';
import { postmasterStatus } from './postmaster';

/** Records older than versioned engines ran the system's PostgreSQL 15. */
const SYSTEM_MAJOR = '15';

export async function upgradePostgresEngine(host: PostgresHost, req: UpgradePostgresEngineRequest): Promise<UpgradePostgresEngineReply> {
  const port = validatePort(req.port);
  const problem = versionFormatProblem('postgres', req.version);
  if (problem) throw new AgentFailure('invalid_argument', `version: ${problem}`);
  let instance = await host.registry.get(port);
  const currentMajor = instance.engineVersion ? postgresMajor(instance.engineVersion) : SYSTEM_MAJOR;
  if (postgresMajor(req.version) !== currentMajor) {
    throw new AgentFailure('invalid_argument', `version: ${req.version} is not a minor version of PostgreSQL ${currentMajor}, which the instance on port ${port} runs; a major upgrade is not offered`);
  }
  // Fetched before anything stops: a version that cannot be had changes nothing.
  await host.engine(req.version);
  const details: string[] = [];

  let versionBefore = instance.engineUpgrade?.opId === req.op_id ? instance.engineUpgrade.versionBefore : '';
  if (!versionBefore) {
    if (!(await postmasterStatus(instance.datadir))) {
      await startPostgres(host, port);
      details.push('was not running: started before the upgrade');
    }
    versionBefore = await postgresServerVersion(instance);
    instance = { ...instance, engineUpgrade: { opId: req.op_id, versionBefore } };
    await host.registry.save(instance);
  }
  if (instance.engineVersion !== req.version) {
    const stopped = await stopPostgres(host, port);
    instance = { ...instance, engineVersion: req.version };
    await host.registry.save(instance);
    details.push(`${stopped.detail}; switched from ${versionBefore} to ${req.version}`);
  }
  const started = await startPostgres(host, port);
  const versionAfter = await postgresServerVersion(instance);
  const { engineUpgrade: _done, ...finished } = instance;
  await host.registry.save(finished);
  host.logger.info({ port, op_id: req.op_id, version_before: versionBefore, version_after: versionAfter }, 'postgres engine upgraded');
  return { port, version_before: versionBefore, version_after: versionAfter, engine_version: req.version, pid: started.pid, detail: details.join('; ') };
}

// UpgradeEngine: moves one instance to another MariaDB version (docs/engine-versions.md).
//
// The new engine is fetched first (nothing stops for a version that cannot be had); then a
// clean stop (SIGTERM: InnoDB shuts down cleanly), the record switched to the new version,
// a start from that version's directory, and that version's mariadb-upgrade, waited for.
// Replication survives: a standby's source and position live in its data dir (master.info,
// gtid_slave_pos) and its role in kcm-role.cnf, so it resumes on start.
//
// Runs under the port's serialiser (index.ts), which the supervisor's restarts also take:
// nothing starts the instance between the stop and the switch. A re-run after the agent
// died part-way (same op_id, nothing in the ledger yet) finds the record switched or not
// and continues; the version measured before the first attempt is kept in the record so the
// reply still says where the instance came from.

import { AgentFailure, type MariaDbUpgradeEngineReply, type MariaDbUpgradeEngineRequest } from '@kcm/agent-api';
import type { AgentContext } from '../../../capability';
import { exec } from '../../../ops/exec';
import { versionFormatProblem } from '../../engines/engine-versions';
import { checkPort, instanceLayout, loadAdminAccount, requireRecord, saveRecord, type InstanceLayout } from './instance-layout';
import { runningPid, startInstance, stopInstance } from './lifecycle';
import { serverVersionOf } from './server-version';
import { withAdmin } from './sql';

const UPGRADE_TIMEOUT_MS = 30 * 60_000;

/** mariadb-upgrade's output in one line: its verdict, or the phases it ran and how it ended. */
function summaryOf(stdout: string): string {
  const lines = stdout.split('\n').map((l) => l.trim()).filter(Boolean);
  const verdict = lines.find((l) => /no need to run/i.test(l));
  if (verdict) return verdict;
  const phases = lines.filter((l) => /^Phase \d+\/\d+/.test(l)).length;
  return `${phases} phases run, ${lines[lines.length - 1] ?? 'no output'}`;
}

async function measuredVersion(layout: InstanceLayout): Promise<string> {
  return withAdmin(layout, await loadAdminAccount(layout), [], serverVersionOf);
}

export async function upgradeEngine(ctx: AgentContext, req: MariaDbUpgradeEngineRequest): Promise<MariaDbUpgradeEngineReply> {
  const port = checkPort(req.port);
  const problem = versionFormatProblem('mariadb', req.version);
  if (problem) throw new AgentFailure('invalid_argument', `version: ${problem}`);
  const engine = await ctx.engines.mariadb(req.version);
  let record = await requireRecord(ctx.stateDir, port);
  const layout = instanceLayout(record.spec);
  const details: string[] = [];

  let versionBefore = record.engineUpgrade?.opId === req.op_id ? record.engineUpgrade.versionBefore : '';
  if (!versionBefore) {
    // Measured from the running server: start it (from the engine it has) if it is down.
    if (!(await runningPid(layout))) {
      await startInstance(ctx, layout);
      details.push('was not running: started before the upgrade');
    }
    versionBefore = await measuredVersion(layout);
    record = { ...record, engineUpgrade: { opId: req.op_id, versionBefore } };
    await saveRecord(ctx.stateDir, record);
  }

  if (record.spec.engine_version !== req.version) {
    await stopInstance(ctx, layout);
    record = { ...record, spec: { ...record.spec, engine_version: req.version } };
    await saveRecord(ctx.stateDir, record);
    details.push(`switched from ${versionBefore} to ${req.version}`);
  }
  const started = await startInstance(ctx, layout);
  // The new version's own tool, as root over the socket (unix_socket auth: no password);
  // nothing it changes reaches the binlog, so a standby gains no GTIDs of its own. Without
  // --force it decides itself what a move needs: within one series (10.11.x to 10.11.y) it
  // says there is nothing to do, which MariaDB documents as right for such a move. Its
  // verdict goes into the reply's detail.
  const tool = await exec(engine.upgrade, ['--no-defaults', `--socket=${layout.socket}`, '--user=root', '--skip-write-binlog'], {
    timeoutMs: UPGRADE_TIMEOUT_MS,
    cwd: layout.instanceDir,
  });
  details.push(`mariadb-upgrade ${req.version}: ${summaryOf(tool.stdout)}`);
  const versionAfter = await measuredVersion(layout);
  const { engineUpgrade: _done, ...finished } = record;
  await saveRecord(ctx.stateDir, finished);
  ctx.logger.info({ port, op_id: req.op_id, version_before: versionBefore, version_after: versionAfter }, 'mariadb engine upgraded');
  return { port, version_before: versionBefore, version_after: versionAfter, engine_version: req.version, pid: started.pid, detail: details.join('; ') };
}

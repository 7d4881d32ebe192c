// kcm local status: is each recorded process alive, what does each manager answer to
// get_meta_mode, which database instances run. Exit 0 only when everything recorded runs
// and the group has a leader.

import { EXIT } from '../io';
import { writeJson } from '../commands/shared';
import { findInstances, instanceProcess } from './instances';
import { askAll } from './meta-probe';
import { readAdminToken } from './admin-token';
import { readLocalCa } from './topology';
import { processState } from './processes';
import { readRecord } from './record';
import { endpointLines, endpointsJson, metaLines, shown } from './render';
import { overallState, serviceStates } from './services';
import type { LocalContext } from './context';

export async function localStatus(ctx: LocalContext, options: { dir: string; json: boolean }): Promise<number> {
  const record = await readRecord(options.dir);
  if (!record) {
    if (options.json) writeJson(ctx.io, { dir: options.dir, recorded: false });
    else ctx.io.stderr.write(`kcm: no kcm local deployment in ${shown(options.dir, ctx.cwd)} (no local.json); start one with kcm local up\n`);
    return EXIT.failed;
  }
  const states = await serviceStates(record);
  const answers = await askAll(record.managers.map((m) => m.url), { fetch: ctx.io.fetch, timeoutMs: 2_000, token: readAdminToken(record.dir), ca: readLocalCa(record.dir) });
  const instances = await findInstances(record.dir, record.agents.map((a) => a.stateDir));
  const instanceStates = await Promise.all(instances.map((i) => processState(instanceProcess(i))));
  const overall = overallState(states);
  const leaderKnown = answers.some((a) => a.state === 'ok');

  if (options.json) {
    const endpoints = endpointsJson(record);
    writeJson(ctx.io, {
      dir: record.dir,
      recorded: true,
      startedAt: record.startedAt,
      running: overall,
      leaderKnown,
      managers: endpoints.managers.map((m, i) => ({ ...m, running: states.managers[i] === 'running', metaMode: answers[i] })),
      agents: endpoints.agents.map((a, i) => ({ ...a, running: states.agents[i] === 'running' })),
      instances: instances.map((inst, i) => ({ pidFile: inst.pidFile, pid: inst.pid, running: instanceStates[i] === 'running' })),
    });
  } else {
    const summary = { all: 'all processes running', none: 'STOPPED (nothing recorded is running)', partial: 'PARTLY running' }[overall];
    const lines = [`kcm local in ${shown(record.dir, ctx.cwd)} (started ${record.startedAt}): ${summary}`, ...endpointLines(record, ctx.cwd, states)];
    if (overall !== 'none') lines.push(...metaLines(answers));
    const runningInstances = instances.filter((_, i) => instanceStates[i] === 'running');
    lines.push(
      runningInstances.length === 0
        ? 'Database instances: none running'
        : `Database instances (${runningInstances.length} running):`,
      ...runningInstances.map((inst) => `  pid ${String(inst.pid).padEnd(8)} ${shown(inst.root, ctx.cwd)}`),
      '',
    );
    ctx.io.stdout.write(lines.join('\n'));
  }
  return overall === 'all' && leaderKnown ? EXIT.ok : EXIT.failed;
}

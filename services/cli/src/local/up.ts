// kcm local up: start managers and agents detached, record them in <dir>/local.json, wait
// until the group has elected a leader, print the endpoints. Running it again while the
// deployment runs only prints the endpoints; while only part of it runs, it starts the
// recorded processes that are not running (a crashed manager, say) and nothing else.

import { existsSync } from 'node:fs';
import path from 'node:path';
import { registerLocalBackupStorage } from './backup-storage';
import { registerLocalMachines } from './machines';
import { readFile } from 'node:fs/promises';
import { EXIT } from '../io';
import { writeJson } from '../commands/shared';
import { bindProblems, describeBindProblem, logTail, probeBind, startDetached, waitListening, writeDeploymentFiles, type BindProblem } from './launcher';
import { waitForLeader } from './meta-probe';
import { readRecord, writeRecord, RECORD_VERSION, type DeploymentRecord } from './record';
import { consoleLines, consoleUrl, endpointLines, endpointsJson, metaLines, shown, tryLines } from './render';
import { agentLabel, firstExited, managerLabel, overallState, serviceStates, type ServiceStates } from './services';
import { agentArgv, managerArgv, planTopology, readLocalCa, type Topology, type TopologyOptions } from './topology';
import type { LocalContext } from './context';
import { adminTokenPath, LOCAL_ADMIN_TOKEN_NAME, readAdminToken } from './admin-token';

export interface UpOptions {
  topology: TopologyOptions;
  json: boolean;
  timeoutMs: number;
}

const ENTRY_POINTS = ['services/manager/src/main.ts', 'services/agent/src/main.ts'];

/** The group a record describes must be the group we are asked for, or the old Raft data would not fit. */
function sameGroup(record: DeploymentRecord, topology: Topology): boolean {
  const members = (list: Array<{ member: string }>) => list.map((m) => m.member).join(',');
  return members(record.managers) === members(topology.managers);
}

async function printRunning(ctx: LocalContext, record: DeploymentRecord, options: UpOptions, note: string, leaderMs?: number, restarted?: string[]): Promise<void> {
  const token = readAdminToken(record.dir);
  if (options.json) {
    writeJson(ctx.io, {
      ...endpointsJson(record),
      console: consoleUrl(record),
      ...(token !== undefined ? { token, tokenFile: adminTokenPath(record.dir) } : {}),
      alreadyRunning: leaderMs === undefined,
      ...(leaderMs !== undefined ? { leaderElectedMs: leaderMs } : {}),
      ...(restarted ? { restarted } : {}),
    });
    return;
  }
  const tokenLines = token === undefined ? [] : ['', `Admin token (${LOCAL_ADMIN_TOKEN_NAME}): ${token}`, `  kept in ${shown(adminTokenPath(record.dir), ctx.cwd)} (mode 0600); kcm uses it when neither --token nor KCM_TOKEN is given`];
  const lines = [note, ...endpointLines(record, ctx.cwd), ...tokenLines, ...consoleLines(record, token), '', ...tryLines(record, ctx.defaultDir, ctx.cwd), ''];
  ctx.io.stdout.write(lines.join('\n'));
}

async function reportStartupFailure(ctx: LocalContext, record: DeploymentRecord, reason: string, detail: string[]): Promise<number> {
  const lines = [`kcm: local up: ${reason}`, ...detail];
  for (const manager of record.managers) {
    lines.push('', `--- last lines of ${shown(manager.log, ctx.cwd)} ---`, ...(await logTail(manager.log)));
  }
  const flags = path.resolve(record.dir) === path.resolve(ctx.defaultDir) ? '' : ` --dir ${shown(record.dir, ctx.cwd)}`;
  lines.push('', `The processes that started are left running for inspection; stop them with: kcm local down${flags}`, '');
  ctx.io.stderr.write(lines.join('\n'));
  return EXIT.failed;
}

export async function localUp(ctx: LocalContext, options: UpOptions): Promise<number> {
  const topology = planTopology(options.topology);
  const existing = await readRecord(topology.dir);
  if (existing) {
    const states = await serviceStates(existing);
    const state = overallState(states);
    if (state === 'all') {
      await printRunning(ctx, existing, options, `kcm local is already running in ${shown(existing.dir, ctx.cwd)} (started ${existing.startedAt}); nothing started.`);
      return EXIT.ok;
    }
    if (!sameGroup(existing, topology)) {
      ctx.io.stderr.write(
        `kcm: local up: ${shown(existing.dir, ctx.cwd)} holds the data of another group (members ${existing.managers.map((m) => m.member).join(', ')}); ` +
          `start it with the same options, or remove it with kcm local down --purge --dir ${shown(existing.dir, ctx.cwd)}\n`,
      );
      return EXIT.failed;
    }
    // Some managers or agents died (a crash, a reboot of one): start those again as they were
    // recorded and leave the running ones alone. Stopping everything first would also stop
    // every database instance the running agents keep.
    if (state === 'partial') return startStopped(ctx, existing, topology, states, options);
  }

  const missing = ENTRY_POINTS.filter((entry) => !existsSync(path.join(ctx.repoRoot, entry)));
  if (missing.length > 0) {
    ctx.io.stderr.write(`kcm: local up: entry point missing from ${ctx.repoRoot}: ${missing.join(', ')}\n`);
    return EXIT.failed;
  }
  const problems = await bindProblems(topology);
  if (problems.length > 0) {
    ctx.io.stderr.write(`kcm: local up: cannot listen where the deployment needs to:\n${problems.map((p) => `  ${describeBindProblem(p)}`).join('\n')}\nNothing was started.\n`);
    return EXIT.failed;
  }

  await writeDeploymentFiles(topology); // makes <dir>/admin.token on the first up
  const record: DeploymentRecord = {
    version: RECORD_VERSION,
    dir: topology.dir,
    startedAt: new Date().toISOString(),
    managerNet: topology.options.managerNet,
    agentNet: topology.options.agentNet,
    first: topology.options.first,
    managers: [],
    agents: [],
  };
  // Recorded after each start, so `down` can stop whatever started even if a later start fails.
  for (const manager of topology.managers) {
    const argv = managerArgv(ctx.nodePath, ctx.repoRoot, manager);
    const pid = await startDetached(argv, manager.logPath, ctx.repoRoot);
    record.managers.push({ index: manager.index, member: manager.member, url: manager.url, pid, argv, log: manager.logPath });
    await writeRecord(record);
  }
  for (const agent of topology.agents) {
    const argv = agentArgv(ctx.nodePath, ctx.repoRoot, agent);
    const pid = await startDetached(argv, agent.logPath, ctx.repoRoot);
    record.agents.push({ index: agent.index, hostaddr: agent.hostaddr, port: agent.port, stateDir: agent.stateDir, machineFile: agent.machineFile, pid, argv, log: agent.logPath });
    await writeRecord(record);
  }

  if (!options.json) ctx.io.stderr.write(`kcm local: started ${record.managers.length} managers and ${record.agents.length} agents; waiting for a leader...\n`);
  return awaitReady(ctx, record, options);
}

/** Starts, with their recorded argv, the recorded managers and agents that are not running. */
async function startStopped(ctx: LocalContext, record: DeploymentRecord, topology: Topology, states: ServiceStates, options: UpOptions): Promise<number> {
  const managers = record.managers.filter((_, i) => states.managers[i] !== 'running');
  const agents = record.agents.filter((_, i) => states.agents[i] !== 'running');
  const addresses = [
    ...managers.flatMap((m) => topology.managers.find((p) => p.index === m.index)?.ports.map((port): [string, number] => [splitHost(m.member), port]) ?? []),
    ...agents.map((a): [string, number] => [a.hostaddr, a.port]),
  ];
  const problems: BindProblem[] = [];
  for (const [host, port] of addresses) {
    const problem = await probeBind(host, port);
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) {
    ctx.io.stderr.write(`kcm: local up: cannot restart what stopped in ${shown(record.dir, ctx.cwd)}:\n${problems.map((p) => `  ${describeBindProblem(p)}`).join('\n')}\nNothing was started.\n`);
    return EXIT.failed;
  }
  const restarted: string[] = [];
  for (const manager of managers) {
    manager.pid = await startDetached(manager.argv, manager.log, ctx.repoRoot);
    restarted.push(managerLabel(manager));
    await writeRecord(record);
  }
  for (const agent of agents) {
    agent.pid = await startDetached(agent.argv, agent.log, ctx.repoRoot);
    restarted.push(agentLabel(agent));
    await writeRecord(record);
  }
  if (!options.json) ctx.io.stderr.write(`kcm local: restarted ${restarted.join(', ')} (the others were running); waiting for a leader...\n`);
  return awaitReady(ctx, record, options, restarted);
}

function splitHost(member: string): string {
  return member.slice(0, member.lastIndexOf(':'));
}

/** Waits for a leader and for every agent to listen, then prints the endpoints. */
async function awaitReady(ctx: LocalContext, record: DeploymentRecord, options: UpOptions, restarted?: string[]): Promise<number> {
  const deadline = Date.now() + options.timeoutMs;
  const waited = await waitForLeader({
    urls: record.managers.map((m) => m.url),
    timeoutMs: options.timeoutMs,
    fetch: ctx.io.fetch,
    token: readAdminToken(record.dir),
    ca: readLocalCa(record.dir),
    abortReason: () => firstExited(record),
  });
  if (!waited.ok) return reportStartupFailure(ctx, record, waited.reason, ['Last answers to get_meta_mode:', ...metaLines(waited.last)]);
  // create_machine needs the agent of its host to answer: the agents must be listening too.
  const silentAgents = await waitListening(record.agents.map((a) => ({ host: a.hostaddr, port: a.port })), deadline);
  const exited = await firstExited(record);
  if (exited) return reportStartupFailure(ctx, record, exited, []);
  if (silentAgents.length > 0) return reportStartupFailure(ctx, record, `agents not listening yet: ${silentAgents.join(', ')}`, record.agents.map((a) => `agent log: ${shown(a.log, ctx.cwd)}`));
  const storageNote = await registerLocalBackupStorage({ url: record.managers[0].url, hostaddr: record.agents[0].hostaddr, agentPort: record.agents[0].port, deploymentDir: record.dir, fetch: ctx.io.fetch, token: readAdminToken(record.dir), ca: readLocalCa(record.dir) });
  if (!options.json) ctx.io.stderr.write(`kcm local: ${storageNote}\n`);
  const machines = await Promise.all(record.agents.map(async (a) => ({ hostaddr: a.hostaddr, storageParas: (JSON.parse(await readFile(a.machineFile, 'utf8')) as { paras: Record<string, string> }).paras })));
  const machineNotes = await registerLocalMachines({ url: record.managers[0].url, machines, fetch: ctx.io.fetch, token: readAdminToken(record.dir), ca: readLocalCa(record.dir) });
  if (!options.json) for (const note of machineNotes) ctx.io.stderr.write(`kcm local: ${note}\n`);
  const seconds = (waited.elapsedMs / 1000).toFixed(1);
  const what = restarted ? `restarted ${restarted.join(', ')}` : 'leader elected';
  await printRunning(ctx, record, options, `kcm local is running in ${shown(record.dir, ctx.cwd)}: ${what}; leader known after ${seconds} s.`, waited.elapsedMs, restarted);
  return EXIT.ok;
}

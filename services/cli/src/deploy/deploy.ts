// kcm deploy <topology.yaml>: every host brought to what the file says (install-host.ts),
// then the group's leader awaited, the agents' machines registered and a CLI context
// written with the managers' HTTPS endpoints, the CA and the admin token file. Re-runnable:
// each step finds its work done and says so.

import { contextFilePath, saveContext } from '../context-file';
import { waitListening } from '../local/launcher';
import { waitForLeader, type MetaAnswer } from '../local/meta-probe';
import { loadDeployment, managerUrls, transportOf, type Deployment } from './deployment';
import type { HostPlan } from './host-plan';
import { installHost, outcomeLines, unitsToStart, type HostOutcome } from './install-host';
import { registerMachines, type RegistrationOutcome } from './register-machines';

export interface DeployRun {
  topologyFile: string;
  /** Only these hosts are installed (scale-out, member replace); all when absent. */
  hosts?: ReadonlySet<string>;
  timeoutMs: number;
  /** The CLI context file (default: $KCM_CONFIG or ~/.config/kcm/config.json). */
  contextFile?: string;
  say: (line: string) => void;
}

export interface DeployResult {
  ok: boolean;
  deployment: Deployment;
  hosts: HostOutcome[];
  leader?: MetaAnswer;
  machines?: RegistrationOutcome;
  context?: { name: string; file: string };
  problem?: string;
}

export function contextName(deployment: Deployment): string {
  return deployment.topology.global.context ?? deployment.topology.name;
}

/** Installs and starts the hosts (in topology order: managers first, so agents find a group). */
export async function installHosts(deployment: Deployment, plans: readonly HostPlan[], say: (line: string) => void): Promise<HostOutcome[]> {
  const outcomes: HostOutcome[] = [];
  for (const plan of plans) {
    const outcome = await installHost(deployment, plan, transportOf(deployment.topology, plan));
    for (const line of outcomeLines(outcome)) say(line);
    outcomes.push(outcome);
  }
  return outcomes;
}

export async function runDeploy(run: DeployRun): Promise<DeployResult> {
  const deployment = await loadDeployment(run.topologyFile);
  const plans = deployment.plans.filter((p) => run.hosts === undefined || run.hosts.has(p.host));
  run.say(`kcm deploy ${deployment.topology.name}: ${plans.length} host(s) through ${deployment.topology.global.transport}; CA and admin token in ${deployment.files.dir}`);
  const hosts = await installHosts(deployment, plans, run.say);
  const result: DeployResult = { ok: false, deployment, hosts };
  const urls = managerUrls(deployment);
  const deadline = Date.now() + run.timeoutMs;
  const waited = await waitForLeader({ urls, timeoutMs: run.timeoutMs, token: deployment.token, ca: deployment.caPem });
  if (!waited.ok) {
    result.problem = `${waited.reason}; last answers: ${waited.last.map((a) => `${a.url} ${a.state}${a.problem ? ` (${a.problem})` : ''}`).join('; ')}`;
    return result;
  }
  result.leader = waited.answer;
  run.say(`leader: ${waited.answer.leader ?? '(unnamed)'}; group ${waited.answer.mode ?? ''} of ${waited.answer.members?.join(', ') ?? '?'}`);
  // create_machine needs the host's agent to answer.
  const agents = plans.flatMap((p) => p.roles.flatMap((r) => (r.kind === 'agent' ? [{ host: r.entry.host, port: deployment.topology.global.agent_port }] : [])));
  const silent = await waitListening(agents, deadline);
  if (silent.length > 0) {
    result.problem = `agents not listening: ${silent.join(', ')} (see /var/log/kcm or journalctl -u kcm-agent on those hosts)`;
    return result;
  }
  const machines = plans.flatMap((p) => p.roles.flatMap((r) => (r.kind === 'agent' ? r.machines : [])));
  result.machines = await registerMachines({ url: urls.join(','), machines, requestIdPrefix: `kcm-deploy-${deployment.topology.name}`, token: deployment.token, ca: deployment.caPem, timeoutMs: Math.max(10_000, deadline - Date.now()) });
  run.say(`machines: ${result.machines.registered.length} registered now, ${result.machines.already.length} already registered`);
  for (const p of result.machines.problems) run.say(`machine not registered: ${p}`);
  const file = run.contextFile ?? contextFilePath();
  const name = contextName(deployment);
  saveContext({ name, endpoints: urls, caFile: deployment.files.caPem, tokenFile: deployment.files.adminToken, makeCurrent: true }, file);
  result.context = { name, file };
  run.say(`CLI context "${name}" written to ${file} (endpoints ${urls.join(', ')}; CA ${deployment.files.caPem}; token ${deployment.files.adminToken})`);
  result.ok = result.machines.problems.length === 0;
  if (!result.ok) result.problem = 'some machines were not registered';
  return result;
}

/**
 * Stops every daemon of the deployment (managers first, so no job reaches a stopping agent).
 * Database instances keep running, as under systemd (the agent unit's KillMode=process).
 */
export async function stopDeployment(deployment: Deployment, say: (line: string) => void): Promise<void> {
  const ordered = [...deployment.plans].sort((a, b) => Number(b.roles.some((r) => r.kind === 'manager')) - Number(a.roles.some((r) => r.kind === 'manager')));
  for (const plan of ordered) {
    const transport = transportOf(deployment.topology, plan);
    for (const unit of unitsToStart(deployment, plan)) {
      await transport.stop(unit);
      say(`${plan.host} (${transport.describe}): stopped ${unit.unit.unitFor(unit.instance)}`);
    }
  }
}


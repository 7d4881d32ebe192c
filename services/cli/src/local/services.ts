// The recorded managers and agents as processes `status` inspects and `down` stops.

import { processState, sameArgv, type OwnedProcess, type ProcessState } from './processes';
import type { AgentRecord, DeploymentRecord, ManagerRecord } from './record';

export function managerLabel(manager: ManagerRecord): string {
  return `manager ${manager.member}`;
}

export function agentLabel(agent: AgentRecord): string {
  return `agent ${agent.hostaddr}:${agent.port}`;
}

function serviceProcess(label: string, recorded: { pid: number; argv: string[] }): OwnedProcess {
  return { label, pid: recorded.pid, isOurs: (argv) => sameArgv(recorded.argv, argv), stopSignal: 'SIGTERM' };
}

export function managerProcesses(record: DeploymentRecord): OwnedProcess[] {
  return record.managers.map((m) => serviceProcess(managerLabel(m), m));
}

export function agentProcesses(record: DeploymentRecord): OwnedProcess[] {
  return record.agents.map((a) => serviceProcess(agentLabel(a), a));
}

export interface ServiceStates {
  managers: ProcessState[];
  agents: ProcessState[];
}

export async function serviceStates(record: DeploymentRecord): Promise<ServiceStates> {
  return {
    managers: await Promise.all(managerProcesses(record).map(processState)),
    agents: await Promise.all(agentProcesses(record).map(processState)),
  };
}

/** all: every recorded service runs; none: not one does; partial: some do. */
export function overallState(states: ServiceStates): 'all' | 'none' | 'partial' {
  const all = [...states.managers, ...states.agents];
  const running = all.filter((s) => s === 'running').length;
  if (running === 0) return 'none';
  return running === all.length ? 'all' : 'partial';
}

/** Why `up` should stop waiting: a service it just started has exited. */
export async function firstExited(record: DeploymentRecord): Promise<string | undefined> {
  const states = await serviceStates(record);
  const m = states.managers.findIndex((s) => s !== 'running');
  if (m >= 0) return `${managerLabel(record.managers[m])} (pid ${record.managers[m].pid}) exited during startup`;
  const a = states.agents.findIndex((s) => s !== 'running');
  if (a >= 0) return `${agentLabel(record.agents[a])} (pid ${record.agents[a].pid}) exited during startup`;
  return undefined;
}

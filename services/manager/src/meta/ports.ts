// Apply functions of the port allocator. Ports are chosen inside apply from the replicated
// state, so two jobs can never be handed the same port, whoever proposed first.

import type { PortsAllocated, PortsReleased } from './commands';
import { dict } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import { machineKey, type MetaState } from './state';

export function applyPortsAllocated(state: MetaState, cmd: PortsAllocated): ApplyOutcome<number[]> {
  const machine = state.machines[machineKey(cmd.hostaddr, cmd.machineType)];
  if (!machine) return refused('NOT_FOUND', `machine ${cmd.hostaddr} is not registered as ${cmd.machineType}`);
  if (!Number.isInteger(cmd.count) || cmd.count < 1) return refused('INVALID_PARAS', `port count must be >= 1, got ${cmd.count}`);
  const taken = (state.ports[cmd.hostaddr] ??= dict());
  const chosen: number[] = [];
  for (let port = machine.portLow; port <= machine.portHigh && chosen.length < cmd.count; port++) {
    if (!taken[port]) chosen.push(port);
  }
  if (chosen.length < cmd.count) {
    return refused(
      'NO_RESOURCES',
      `machine ${cmd.hostaddr} has ${chosen.length} free ports in ${machine.portLow}-${machine.portHigh}, ${cmd.count} needed`,
    );
  }
  for (const port of chosen) taken[port] = { owner: cmd.owner, machineType: cmd.machineType };
  return accepted(chosen);
}

/** Releasing a port that is not allocated is a no-op, so a retried release succeeds. */
export function applyPortsReleased(state: MetaState, cmd: PortsReleased): ApplyOutcome<{ released: number }> {
  const taken = state.ports[cmd.hostaddr];
  let released = 0;
  for (const port of cmd.ports) {
    if (taken?.[port]) {
      delete taken[port];
      released++;
    }
  }
  if (taken && Object.keys(taken).length === 0) delete state.ports[cmd.hostaddr];
  return accepted({ released });
}

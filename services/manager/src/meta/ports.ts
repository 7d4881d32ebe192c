// The port allocator, used inside the apply of the commands that place and remove
// instances (ClusterCreated, InstancesPlaced, InstancesRemoved, the rollback commands).
// Ports are chosen from the replicated state, so two jobs can never be handed the same
// port, whoever proposed first.

import { dict } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import { machineKey, type MachineType, type MetaState } from './state';

export interface PortRequest {
  hostaddr: string;
  machineType: MachineType;
  count: number;
  /** What the ports are for, e.g. `job:12/shard:3`. */
  owner: string;
}

/** Takes the lowest `count` free ports of the machine's range, or refuses and takes none. */
export function allocatePorts(state: MetaState, req: PortRequest): ApplyOutcome<number[]> {
  const machine = state.machines[machineKey(req.hostaddr, req.machineType)];
  if (!machine) return refused('NOT_FOUND', `machine ${req.hostaddr} is not registered as ${req.machineType}`);
  if (!Number.isInteger(req.count) || req.count < 1) return refused('INVALID_PARAS', `port count must be >= 1, got ${req.count}`);
  const taken = (state.ports[req.hostaddr] ??= dict());
  const chosen: number[] = [];
  for (let port = machine.portLow; port <= machine.portHigh && chosen.length < req.count; port++) {
    if (!taken[port]) chosen.push(port);
  }
  if (chosen.length < req.count) {
    return refused(
      'NO_RESOURCES',
      `machine ${req.hostaddr} has ${chosen.length} free ports in ${machine.portLow}-${machine.portHigh}, ${req.count} needed`,
    );
  }
  for (const port of chosen) taken[port] = { owner: req.owner, machineType: req.machineType };
  return accepted(chosen);
}

/** Releasing a port that is not allocated is a no-op, so a retried release succeeds. */
export function releasePorts(state: MetaState, hostaddr: string, ports: readonly number[]): { released: number } {
  const taken = state.ports[hostaddr];
  let released = 0;
  for (const port of ports) {
    if (taken?.[port]) {
      delete taken[port];
      released++;
    }
  }
  if (taken && Object.keys(taken).length === 0) delete state.ports[hostaddr];
  return { released };
}

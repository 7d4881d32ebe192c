// Apply functions of the machines domain.

import { accepted, refused, type ApplyOutcome } from './outcome';
import { dict } from './dict';
import { type HostFacts, machineKey, type MachineRecord, type MachineRegistration, type MachineType, type MetaState, type NodeStats } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

export interface MachineRegistered extends CommandBase<typeof CommandKind.MachineRegistered>, MachineRegistration {}

export interface MachineRemoved extends CommandBase<typeof CommandKind.MachineRemoved> {
  hostaddr: string;
  machineType: MachineType;
}

export interface MachineStatusSet extends CommandBase<typeof CommandKind.MachineStatusSet> {
  hostaddr: string;
  nodeStats: NodeStats;
  /** Who moved it: an operator's set_machine or the leader's health monitor. */
  reason: 'operator' | 'health';
}

/**
 * What a host's agent measured, when it differs enough from what is recorded (see the
 * host-facts refresher): recorded on every machine record of the host, each keeping the
 * free space of the directories its own registration names. The measuring leader's clock
 * is `at`, kept as the facts' measuredAt. Refused (NOT_FOUND) for a host no longer registered.
 */
export interface MachineFactsMeasured extends CommandBase<typeof CommandKind.MachineFactsMeasured> {
  hostaddr: string;
  facts: Omit<HostFacts, 'measuredAt'>;
}

/** Every machine type (a new one fails to compile here): a host's records are at machineKey(hostaddr, type). */
const MACHINE_TYPES = Object.keys({ storage: true, computer: true } satisfies Record<MachineType, true>) as MachineType[];

export function applyMachineRegistered(state: MetaState, cmd: MachineRegistered): ApplyOutcome<null> {
  const key = machineKey(cmd.hostaddr, cmd.machineType);
  if (state.machines[key]) return refused('CONFLICT', `machine ${cmd.hostaddr} is already registered as ${cmd.machineType}`);
  const clash = Object.values(state.machines).find(
    (m) => m.hostaddr === cmd.hostaddr && m.portLow <= cmd.portHigh && cmd.portLow <= m.portHigh,
  );
  if (clash) {
    return refused(
      'CONFLICT',
      `port_range ${cmd.portLow}-${cmd.portHigh} overlaps ${clash.portLow}-${clash.portHigh} of ${cmd.hostaddr} as ${clash.machineType}; keep the ranges of one host apart`,
    );
  }
  const { kind: _kind, at, facts, ...fields } = cmd;
  state.machines[key] = { ...fields, facts: factsWithDict(facts), nodeStats: 'running', nodeStatsSetBy: 'operator', registeredAt: at };
  return accepted(null);
}

export function applyMachineRemoved(state: MetaState, cmd: MachineRemoved): ApplyOutcome<null> {
  const key = machineKey(cmd.hostaddr, cmd.machineType);
  if (!state.machines[key]) return refused('NOT_FOUND', `machine ${cmd.hostaddr} is not registered as ${cmd.machineType}`);
  const inUse = Object.entries(state.ports[cmd.hostaddr] ?? {}).filter(([, a]) => a.machineType === cmd.machineType);
  if (inUse.length > 0) {
    const ports = inUse.map(([p]) => p).join(', ');
    return refused('CONFLICT', `machine ${cmd.hostaddr} (${cmd.machineType}) still has instances on ports ${ports}; delete them first`);
  }
  delete state.machines[key];
  return accepted(null);
}

export function applyMachineStatusSet(state: MetaState, cmd: MachineStatusSet): ApplyOutcome<{ changed: number }> {
  const records = machinesOfHost(state, cmd.hostaddr);
  if (records.length === 0) return refused('NOT_FOUND', `machine ${cmd.hostaddr} is not registered`);
  let changed = 0;
  for (const m of records) {
    if (m.nodeStats !== cmd.nodeStats) changed++;
    m.nodeStats = cmd.nodeStats;
    m.nodeStatsSetBy = cmd.reason;
  }
  return accepted({ changed });
}

/**
 * Newly measured facts of a host on each of its machine records. Each record keeps the free
 * space of its own directories (registrationDirs); a directory the measurement lacks keeps
 * what was recorded for it.
 */
export function applyMachineFactsMeasured(state: MetaState, cmd: MachineFactsMeasured): ApplyOutcome<{ machines: number }> {
  const records = machinesOfHost(state, cmd.hostaddr);
  if (records.length === 0) return refused('NOT_FOUND', `machine ${cmd.hostaddr} is not registered`);
  // Directory names came from clients (create_machine's paras): read through a Map, never by indexing.
  const measured = new Map(Object.entries(cmd.facts.freeDiskBytes));
  for (const m of records) {
    const before = new Map(Object.entries(m.facts?.freeDiskBytes ?? {}));
    const freeDiskBytes = dict<number>();
    for (const dir of registrationDirs(m)) {
      const free = measured.get(dir) ?? before.get(dir);
      if (free !== undefined) freeDiskBytes[dir] = free;
    }
    m.facts = {
      cores: cmd.facts.cores,
      memoryMb: cmd.facts.memoryMb,
      freeDiskBytes,
      mariadbInstalled: cmd.facts.mariadbInstalled,
      postgresInstalled: cmd.facts.postgresInstalled,
      measuredAt: cmd.at,
    };
  }
  return accepted({ machines: records.length });
}

/** The directories a registration names (create_machine's datadir, logdir, wal_log_dir, comp_datadir), each once. */
export function registrationDirs(m: Pick<MachineRecord, 'datadir' | 'logdir' | 'walLogDir' | 'compDatadir'>): string[] {
  return [...new Set([m.datadir, m.logdir, m.walLogDir, m.compDatadir])];
}

/**
 * A host's machine records, by key, not by a scan: at 1,000 hosts a scan per command or
 * request (every health verdict, every set_machine's validation and apply) was 2,000 steps.
 */
export function machinesOfHost(state: MetaState, hostaddr: string): MachineRecord[] {
  const records: MachineRecord[] = [];
  for (const type of MACHINE_TYPES) {
    const m = state.machines[machineKey(hostaddr, type)];
    if (m) records.push(m);
  }
  return records;
}

/** Facts as recorded: free disk space is keyed by directories a client named. */
export function factsWithDict(facts: HostFacts | null): HostFacts | null {
  return facts && { ...facts, freeDiskBytes: dict(facts.freeDiskBytes) };
}

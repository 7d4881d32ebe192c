// Replicated commands of the metadata state machine.
//
// Numbering is append-only: a command's number is written into the Raft log and read back
// by every future version of kcm, so never renumber or reuse one; add new kinds at the end.
// Everything a command needs that is not derivable from the replicated state (wall time,
// facts the proposer measured) travels inside the command, so apply stays deterministic.

import type { HostFacts, JobResultRecord, MachineType, NodeStats } from './state';

export const CommandKind = {
  MachineRegistered: 1,
  MachineRemoved: 2,
  MachineStatusSet: 3,
  JobSubmitted: 4,
  JobStarted: 5,
  JobStepDone: 6,
  JobProgress: 7,
  JobFinished: 8,
  PortsAllocated: 9,
  PortsReleased: 10,
  MachineFactsRecorded: 11,
} as const;
export type CommandKind = (typeof CommandKind)[keyof typeof CommandKind];

interface Base<K extends CommandKind> {
  kind: K;
  /** Proposer's wall clock (ms), for display and generated names only; never for ordering. */
  at: number;
}

export interface MachineRegistered extends Base<typeof CommandKind.MachineRegistered> {
  hostaddr: string;
  machineType: MachineType;
  portLow: number;
  portHigh: number;
  rackId: string;
  datadir: string;
  logdir: string;
  walLogDir: string;
  compDatadir: string;
  totalMemMb: number;
  totalCpuCores: number;
  facts: HostFacts | null;
}

export interface MachineRemoved extends Base<typeof CommandKind.MachineRemoved> {
  hostaddr: string;
  machineType: MachineType;
}

export interface MachineStatusSet extends Base<typeof CommandKind.MachineStatusSet> {
  hostaddr: string;
  nodeStats: NodeStats;
  /** Who moved it: an operator's set_machine or the leader's health monitor. */
  reason: 'operator' | 'health';
}

export interface MachineFactsRecorded extends Base<typeof CommandKind.MachineFactsRecorded> {
  hostaddr: string;
  facts: HostFacts;
}

export interface JobSubmitted extends Base<typeof CommandKind.JobSubmitted> {
  jobType: string;
  sentJobType: string;
  paras: Record<string, unknown>;
  /** Client idempotency key: the same key yields the same job, never a second one. */
  requestId: string | null;
  /** Jobs with the same lock key (e.g. `cluster:7`) run one at a time in submission order. */
  lockKey: string | null;
}

export interface JobStarted extends Base<typeof CommandKind.JobStarted> {
  jobId: string;
  stepNames: string[];
}

export interface JobStepDone extends Base<typeof CommandKind.JobStepDone> {
  jobId: string;
  step: number;
  output: unknown;
}

export interface JobProgress extends Base<typeof CommandKind.JobProgress> {
  jobId: string;
  step: number;
  unitsDone: number;
  unitsTotal: number;
}

export interface JobFinished extends Base<typeof CommandKind.JobFinished> {
  jobId: string;
  outcome: JobResultRecord;
}

export interface PortsAllocated extends Base<typeof CommandKind.PortsAllocated> {
  hostaddr: string;
  machineType: MachineType;
  count: number;
  /** What the ports are for, e.g. `job:12/shard:3`; released together by owner. */
  owner: string;
}

export interface PortsReleased extends Base<typeof CommandKind.PortsReleased> {
  hostaddr: string;
  ports: number[];
}

export type Command =
  | MachineRegistered
  | MachineRemoved
  | MachineStatusSet
  | MachineFactsRecorded
  | JobSubmitted
  | JobStarted
  | JobStepDone
  | JobProgress
  | JobFinished
  | PortsAllocated
  | PortsReleased;

export function encodeCommand(cmd: Command): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(cmd));
}

export function decodeCommand(data: Uint8Array): Command {
  return JSON.parse(new TextDecoder().decode(data)) as Command;
}

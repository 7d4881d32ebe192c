// The replicated metadata: plain JSON-serialisable records, so a snapshot is one image.

export type MachineType = 'storage' | 'computer';
export type NodeStats = 'running' | 'dead';

/** What the host's agent reported when the machine was registered or last checked. */
export interface HostFacts {
  cores: number;
  memoryMb: number;
  /** Free bytes of each directory the registration names. */
  freeDiskBytes: Record<string, number>;
  mariadbInstalled: boolean;
  postgresInstalled: boolean;
}

export interface MachineRecord {
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
  nodeStats: NodeStats;
  /** Who set nodeStats last: the health monitor revives only machines it marked dead itself. */
  nodeStatsSetBy: 'operator' | 'health';
  facts: HostFacts | null;
  registeredAt: number;
}

export type JobStatus = 'started' | 'ongoing' | 'done' | 'failed';

export interface JobResultRecord {
  ok: boolean;
  errorCode: number;
  errorInfo: string;
  attachment: Record<string, unknown> | null;
}

export interface JobProgressRecord {
  step: number;
  unitsDone: number;
  unitsTotal: number;
}

export interface JobRecord {
  id: string;
  jobType: string;
  sentJobType: string;
  paras: Record<string, unknown>;
  requestId: string | null;
  lockKey: string | null;
  status: JobStatus;
  submittedAt: number;
  finishedAt: number | null;
  /** Filled when the runner starts the job; a resumed job keeps them. */
  stepNames: string[];
  /** Output of each finished step, by step number; a step never runs again once here. */
  stepOutputs: Record<number, unknown>;
  progress: JobProgressRecord | null;
  result: JobResultRecord | null;
}

export interface PortAllocation {
  owner: string;
  machineType: MachineType;
}

export interface MetaState {
  /** Keyed by `${hostaddr}/${machineType}`: one host may be registered as both types. */
  machines: Record<string, MachineRecord>;
  jobs: Record<string, JobRecord>;
  /** Idempotency keys to the job they created. */
  requestIds: Record<string, string>;
  /** hostaddr -> port -> allocation: ports are unique per host across both machine types. */
  ports: Record<string, Record<number, PortAllocation>>;
  counters: { job: number };
}

export function emptyMetaState(): MetaState {
  return { machines: {}, jobs: {}, requestIds: {}, ports: {}, counters: { job: 0 } };
}

export const machineKey = (hostaddr: string, machineType: MachineType): string => `${hostaddr}/${machineType}`;

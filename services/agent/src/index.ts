// The agent server. Its clients and the contract types are in @kcm/agent-api.
export { startAgent, AGENT_VERSION } from './server';
export type { AgentOptions, RunningAgent } from './server';

// What the agent lays down on a host, for tests that inspect or clean up after it: the
// cgroup hierarchy its instances' CPU limits live in, an instance's directories, and the
// GTID position a physical backup it took is consistent with.
export { detectCpuHierarchy } from './capabilities/cgroup/detect';
export type { CpuHierarchy } from './capabilities/cgroup/detect';
export { descendantsOf, parentMap } from './capabilities/cgroup/processes';
export { instanceLayout } from './capabilities/mariadb/instance/instance-layout';
export type { InstanceLayout } from './capabilities/mariadb/instance/instance-layout';
export { backupGtid } from './capabilities/mariadb/backup/rebuild';

// The tools the agent runs for a physical backup, for benches that run the same command
// line beside it (bench/backup's raw pipe).
export { mariadbTools } from './capabilities/mariadb/instance/instance-layout';
export { systemMariaDbEngine } from './capabilities/engines/engine-paths';
export { zstdTool } from './capabilities/mariadb/backup/backup-compression';
export { rawBytesOfZstdSummary } from './capabilities/mariadb/backup/backup-info';

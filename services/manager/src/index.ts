// The manager's public surface: what code outside services/manager (test/, bench/) may
// import, as `@kcm/manager`. Anything not named here is internal and may move or change
// without notice; when a file below moves, only this index follows it, and its importers
// stay as they are. main.ts is the process entry point and is run, never imported.

// Build and configure a member (main.ts does the same, then listens).
export { buildManager } from './app';
export type { BuildOptions, Manager } from './app';
export { parseManagerConfig } from './config';
export type { ManagerConfig } from './config';

// The wire surfaces a client may speak to: the JSON job API's path, and the peers' forward
// service (for clients that check who the peer port lets in).
export { EMIT_PATH } from './gateway/build-gateway';
export { forwardServiceDefinition } from './submit/forward/forward-proto';

// The replicated state: its records, the numbered commands, the one apply function and the
// snapshot images, for benches that load and image the state without a group.
export { emptyMetaState } from './meta/state';
export type {
  ClusterAccounts, ClusterOptions, ClusterRecord, CompRecord, JobRecord, MachineRecord, MetaState, ShardRecord, StorageNodeRecord, StoredAccount,
} from './meta/state';
export { CommandKind } from './meta/commands';
export type { Command } from './meta/commands';
export { applyCommand } from './meta/fsm';
export { allocatePorts } from './meta/ports';
export { restoreMeta, restoreMetaInPieces, snapshotMeta, snapshotMetaChunks } from './meta/snapshot/image';
export { archiveCoversUntil, shardArchive } from './meta/binlog-archive';

// Cluster accounts as the state stores them (sealed) and as the jobs use them (open).
export { SecretBox } from './secrets/secret-box';
export { openAccounts, sealAccount } from './secrets/accounts';
export type { DbAccount, OpenAccounts } from './secrets/accounts';

// Backup storage and the metadata backup image, for tests that check what a backup wrote.
export { openBackupStorage, requireIntact } from './backup/storage';
export type { BackupStorage } from './backup/storage';
export { metadataBackupImage } from './backup/metadata-image';

// Leader-only services that benches drive on their own, round by round.
export { HealthMonitor } from './leader/health-monitor';
export type { HealthMonitorOptions } from './leader/health-monitor';
export { DEFAULT_FAILURE_DETECT_INTERVAL_MS, ShardFailureDetector } from './leader/shard-failure-detector';
export type { FailureDetectorOptions } from './leader/shard-failure-detector';

/**
 * @kcm/protocol: the Emit job API of the spec (emit-api.md), defined once.
 * The gateway and the CLI validate with `parseRequest` and answer with the reply builders.
 */
export {
  PROTOCOL_VERSION,
  JOB_TYPES,
  JOB_TYPE_ALIASES,
  JOB_MODES,
  canonicalJobType,
  isJobType,
  type JobType,
  type JobMode,
  type AsyncJobType,
} from './job-types';
export {
  parseRequest,
  parseRequestJson,
  validateParas,
  unknownParas,
  type RequestEnvelope,
  type ValidRequest,
  type AnyValidRequest,
  type ParseResult,
} from './envelope';
export { PARAS_SCHEMAS, type ParasOf, type ParasInputOf } from './paras';
export type {
  JobResults,
  ResultOf,
  StatusAttachment,
  JobProgressAttachment,
  EmptyResult,
  CreateClusterResult,
  DeleteClusterResult,
  AddShardsResult,
  AddCompsResult,
  AddNodesResult,
  RebuildNodeResult,
  RebuiltNodeResult,
  UpdateInstanceCgroupResult,
  RaftMissionResult,
  ManualSwitchResult,
  SetNoswitchResult,
  SwitchStepTiming,
  LogicalBackupResult,
  LogicalRestoreResult,
  ShardStepResult,
  ComputerStepResult,
  ClusterRestoreResult,
  RestoredShardResult,
  RestoredCatalogResult,
  ExpandClusterResult,
  RepartitionTablesResult,
  ClusterDetailEngineVersions,
  InstanceEngineVersion,
} from './results';
export { ERROR_CATALOG, KcmError, errorEntry, errorEntryByCode, type ErrorName, type ErrorEntry } from './errors';
export { acceptReply, doneReply, statusReply, errorReply, JOB_STATUSES, type JobStatus, type ReplyEnvelope } from './replies';
export { describeJob, FIELD_DOCS, type JobDescription, type ParaDescription } from './describe';
export {
  parseBackupWindow,
  parseDbTable,
  parseFlag,
  parseHostAddress,
  parseId,
  parseIdentifier,
  parsePeer,
  parsePort,
  parsePortRange,
  parseQualifiedTable,
  parseRepartitionPairs,
  parseRestoreTime,
  OBJECT_TYPES,
  PORT_RANGE_BOUNDS,
  type DbTable,
  type ObjectType,
  type Parsed,
  type RepartitionPair,
} from './formats';
export { METADATA_CLUSTER_ID } from './paras/backup';
export { MIN_NODES_PER_SHARD } from './paras/clusters';
export { ipPortString, parseIpPort, MAX_NOSWITCH_TIMEOUT_S, NOSWITCH_TYPES, type IpPort } from './paras/shard-ha';
export type { ManualBackupClusterResult, ShardBackupResult, CatalogBackupResult, CreateBackupStorageResult } from './results';
export { BACKUP_STORAGE_TYPES } from './paras/backup-storage';
export { DEFAULT_S3_REGION, S3_PARAS, S3_REQUIRED_PARAS } from './paras/s3-storage-fields';
export { CLUSTER_ACCOUNTS, type ClusterAccountName } from './paras/passwords';
export type { RotateClusterPasswordsResult, UpgradeClusterResult, UpgradedInstance } from './results';
export type { BackupPolicyResult, RestoreDrillResult } from './results';
export { parseStorageVersion, parseComputerVersion } from './paras/upgrade';
export { ROLES, REQUIRED_ROLE, TOKEN_NAME_PATTERN, TOKEN_NAME_RULE, isRole, roleAllows, forbiddenReason, type Role, type Identity } from './roles';

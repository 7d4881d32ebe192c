// @kcm/agent-api: the contract between the manager and the agents, used by both sides.
// The agent protos and their TypeScript shapes, the clients (one call helper with
// deadlines), where channel credentials come from, the manager's bounded client pool, and
// the typed agent errors with their one mapping to catalog error codes.

export * from './contract/agent';
export * from './contract/mariadb';
export * from './contract/postgres';
export * from './contract/cgroup';
export * from './contract/mariadb-ha';
export * from './gtid';
export * from './xa';
export * from './contract/storage';
export * from './contract/mariadb-restore';
export * from './contract/mariadb-logical';
export * from './contract/mariadb-tables';
export * from './contract/table-move';
export * from './contract/shard-data';
export { parseValues, stringifyValues } from './values';
export * from './contract/passwords';
export * from './contract/host-probe';
export * from './contract/shard-routing';
export { AGENT_PROTO_FILES, AGENT_PROTO_OPTIONS, agentProtoPath, loadAgentService } from './load-proto';
export { activeTls, channelCredentials, onTlsReloaded, reloadTlsNow, serverCredentials, useInsecure, useTls } from './credentials';
export { CERT_EXPIRY_METRIC, exportCertExpiry } from './tls/expiry-metric';
export { ReloadingTlsMaterial, TLS_RELOAD_CHECK_MS, filesSignature } from './tls/reloading';
export { TlsMaterialError, issuedByOneOf, loadTlsMaterial, roleOf, ROLE_URI_PREFIX, type TlsFiles, type TlsMaterial, type TlsRole } from './tls/material';
export { callerGuard, type CallerPolicy } from './tls/guard';
export { startTls, type TlsStartOptions } from './tls/startup';
export { certExtensions, ensureCa, issueCert, type CaFiles, type CertRequest } from './tls/issue';
export { DATA_PLANE_METHODS, TICKET_KEY, TICKET_SIGNER_KEY, mintTicket, ticketMetadataFor, ticketRefusal, type Ticket, type TicketPayload } from './tls/ticket';
export { dataFrameHeader, endFrame, FrameReader, MAX_PLANE_REQUEST_BYTES, planeAddressOf, type PlaneBackupRequest, type PlaneBackupFacts, type PlaneGetRequest, type PlaneRequest, type PlaneTrailer } from './plane/frames';
export { planeEnabled, planeReceive, planeStream, type PlaneCallOptions, type PlaneReception } from './plane/client';
export { agentChannelOptions } from './channel-options';
export { diskFullMessage, formatBytes, INSTALL_MIN_FREE_BYTES, storageWalDirNeed } from './disk-space';
export { agentClient, callUnary } from './call';
export { peerProtocols, protocolClientInterceptor, protocolOfMetadata, protocolServerGuard, resetProtocolMemory, type ProtocolIdentity, type ProtocolWarn, type SeenProtocol } from './protocol-version';
export { channelConnecting, leaseChannel, renewChannel, sharedChannelCount } from './shared-channels';
export {
  AgentCallError,
  AgentFailure,
  AgentUnreachableError,
  agentCallFailure,
  agentStatusOf,
  catalogErrorOf,
  isAgentUnreachable,
  type AgentFailureKind,
} from './errors';
export { AgentClient } from './clients/agent-client';
export { MariaDbAgentClient, type MariaDbDeadlines } from './clients/mariadb-client';
export { PostgresAgentClient } from './clients/postgres-client';
export { CgroupAgentClient, type SetCpuLimitParams } from './clients/cgroup-client';
export {
  AgentPool,
  type AgentApi,
  type AgentPoolOptions,
  type Agents,
  type CgroupAgentApi,
  type ClientApi,
  type MariaDbAgentApi,
  type MariaDbHaAgentApi,
  type MariaDbRestoreAgentApi,
  type PasswordAgentApi,
  type HostProbeAgentApi,
  type ShardDataAgentApi,
  type TableMoveAgentApi,
  type RelationSwitchAgentApi,
  type MariaDbTablesAgentApi,
  type MariaDbLogicalAgentApi,
  type CatalogDumpAgentApi,
  type PostgresAgentApi,
  type ShardRoutingAgentApi,
  type WithAgent,
} from './pool';
export { MariaDbHaAgentClient, type MariaDbHaDeadlines } from './clients/mariadb-ha-client';
export { CatalogDumpAgentClient, StorageAgentClient, type StorageDeadlines } from './clients/storage-client';
export { MariaDbRestoreAgentClient, type MariaDbRestoreDeadlines } from './clients/mariadb-restore-client';
export { PasswordAgentClient, type RoleAccount } from './clients/password-client';
export { HostProbeAgentClient, isUnimplemented } from './clients/host-probe-client';
export { MariaDbLogicalAgentClient, type LogicalDump, type LogicalDumpParams } from './clients/mariadb-logical-client';
export { MariaDbTablesAgentClient } from './clients/mariadb-tables-client';
export { TableMoveAgentClient, type ForeignTableRef } from './clients/table-move-client';
export { ShardDataAgentClient } from './clients/shard-data-client';
export { RelationSwitchAgentClient } from './clients/relation-switch-client';
export { ShardRoutingAgentClient } from './clients/shard-routing-client';
export { serveBeats, watchIntervalOf, WATCH_INTERVAL_DEFAULT_MS } from './beats';

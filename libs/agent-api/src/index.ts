// @kcm/agent-api: the contract between the manager and the agents, used by both sides.
// The agent protos and their TypeScript shapes, the clients (one call helper with
// deadlines), where channel credentials come from, the manager's bounded client pool, and
// the typed agent errors with their one mapping to catalog error codes.

export * from './contract/agent';
export * from './contract/mariadb';
export * from './contract/postgres';
export * from './contract/cgroup';
export * from './contract/storage';
export * from './contract/mariadb-restore';
export { AGENT_PROTO_FILES, AGENT_PROTO_OPTIONS, agentProtoPath, loadAgentService } from './load-proto';
export { channelCredentials, serverCredentials } from './credentials';
export { agentChannelOptions } from './channel-options';
export { agentClient, callUnary } from './call';
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
export { CatalogDumpAgentClient, StorageAgentClient, type StorageDeadlines } from './clients/storage-client';
export {
  AgentPool,
  type AgentApi,
  type AgentPoolOptions,
  type Agents,
  type CgroupAgentApi,
  type ClientApi,
  type MariaDbAgentApi,
  type PostgresAgentApi,
  type WithAgent,
} from './pool';
export { MariaDbRestoreAgentClient, type MariaDbRestoreDeadlines } from './clients/mariadb-restore-client';

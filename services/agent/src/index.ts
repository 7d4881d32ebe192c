export { AgentClient, AgentUnreachableError } from './client';
export { startAgent, AGENT_VERSION } from './server';
export type { AgentOptions, RunningAgent } from './server';
export type { HealthReply, HostFactsReply, PrepareDirsReply } from './agent-proto';

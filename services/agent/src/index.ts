// The agent server. Its clients and the contract types are in @kcm/agent-api.
export { startAgent, AGENT_VERSION } from './server';
export type { AgentOptions, RunningAgent } from './server';

// One gRPC client per host's agent, reused by jobs and the health monitor
// (a client per call would open a connection per call).

import { AgentClient } from '@kcm/agent';

export class AgentPool {
  private readonly clients = new Map<string, AgentClient>();

  constructor(private readonly agentPort: number, private readonly deadlineMs = 5000) {}

  /** The agent of a host, at `<hostaddr>:<agent_port>` (DESIGN.md section 2). */
  agentFor(hostaddr: string): AgentClient {
    let client = this.clients.get(hostaddr);
    if (!client) {
      const host = hostaddr.includes(':') ? `[${hostaddr}]` : hostaddr;
      client = new AgentClient(`${host}:${this.agentPort}`, this.deadlineMs);
      this.clients.set(hostaddr, client);
    }
    return client;
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

// Compute instances under the agent's supervisor (../supervisor.ts): how it finds, judges
// and starts one, and the desired state each command leaves behind.

import { access } from 'node:fs/promises';
import path from 'node:path';
import type { AgentContext } from '../../capability';
import { validatePort } from './layout';
import { startPostgres, type PostgresHost } from './lifecycle';
import { postmasterStatus } from './postmaster';

export function postgresSupervision(ctx: AgentContext, host: PostgresHost, exclusive: <T>(port: number, work: () => Promise<T>) => Promise<T>) {
  ctx.supervisor.register({
    kind: 'postgres',
    exclusive,
    async runningPid(port) {
      const instance = await host.registry.find(port);
      return instance ? ((await postmasterStatus(instance.datadir))?.pid ?? 0) : 0;
    },
    async startBlocker(port) {
      const instance = await host.registry.find(port);
      if (!instance) return 'no PostgreSQL instance on this port is installed by this agent';
      const initialised = await access(path.join(instance.datadir, 'PG_VERSION')).then(() => true, () => false);
      return initialised ? '' : `data directory ${instance.datadir} holds no PostgreSQL cluster`;
    },
    async start(port) {
      // A postmaster SIGKILLed leaves backends that still hold its shared memory for a
      // moment; the start then fails and the supervisor retries with backoff.
      return (await startPostgres(host, port)).pid;
    },
  });
  const desired = ctx.supervisor.desired;
  return {
    async runningAfter<T>(port: number, command: () => Promise<T>): Promise<T> {
      const result = await command();
      await desired.set('postgres', validatePort(port), 'running');
      return result;
    },
    stopped: (port: number) => desired.set('postgres', validatePort(port), 'stopped').then(() => undefined),
    forget: (port: number) => desired.drop('postgres', validatePort(port)),
    async report(port: number): Promise<{ supervisor_restarts: number; desired_state: string }> {
      const { restarts, desired: state } = await ctx.supervisor.restarts('postgres', port);
      return { supervisor_restarts: restarts, desired_state: state };
    },
  };
}

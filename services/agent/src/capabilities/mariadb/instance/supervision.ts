// MariaDB instances under the agent's supervisor (../../supervisor.ts): how it finds, judges
// and starts one, and the desired state each command leaves behind.

import { access } from 'node:fs/promises';
import path from 'node:path';
import type { AgentContext } from '../../../capability';
import { INITIALIZED_MARKER } from './install';
import { instanceLayout, loadRecord } from './instance-layout';
import { layoutOf, runningPid, startInstance } from './lifecycle';

export interface SupervisionReport {
  /** Times the agent's supervisor restarted this instance after finding it down. */
  supervisor_restarts: number;
  /** running | stopped, or '' when the agent is not asked to keep it either way. */
  desired_state: string;
  /** When the supervisor last restarted it after it died (ms since the epoch; 0: never). */
  supervisor_restarted_at_ms: number;
}

export function mariadbSupervision(ctx: AgentContext, exclusive: <T>(port: number, work: () => Promise<T>) => Promise<T>) {
  ctx.supervisor.register({
    kind: 'mariadb',
    exclusive,
    async runningPid(port) {
      const record = await loadRecord(ctx.stateDir, port);
      return record ? runningPid(instanceLayout(record.spec)) : 0;
    },
    async startBlocker(port) {
      const record = await loadRecord(ctx.stateDir, port);
      if (!record) return 'no MariaDB instance on this port is installed by this agent';
      // A rebuild unmarks the data dir while it replaces it; an install marks it once mariadb-install-db is done.
      const marker = path.join(instanceLayout(record.spec).instanceDir, INITIALIZED_MARKER);
      const initialised = await access(marker).then(() => true, () => false);
      return initialised ? '' : 'its data directory is not initialised (an install or a rebuild did not finish)';
    },
    async start(port) {
      return (await startInstance(ctx, await layoutOf(ctx, port))).pid;
    },
  });
  const desired = ctx.supervisor.desired;
  return {
    /** Runs a command that leaves the instance running; only once it succeeded is the instance wanted running. */
    async runningAfter<T>(port: number | undefined, command: () => Promise<T>): Promise<T> {
      const result = await command();
      if (port) await desired.set('mariadb', port, 'running');
      return result;
    },
    /** An explicit Stop: recorded before stopping, so the supervisor does not restart it meanwhile. */
    stopped: (port: number) => desired.set('mariadb', port, 'stopped').then(() => undefined),
    /** Remove: forgotten first, so nothing brings back what is being deleted. */
    forget: (port: number) => desired.drop('mariadb', port),
    async report(port: number): Promise<SupervisionReport> {
      const { restarts, desired: state, lastRestartAtMs } = await ctx.supervisor.restarts('mariadb', port);
      return { supervisor_restarts: restarts, desired_state: state, supervisor_restarted_at_ms: lastRestartAtMs };
    },
  };
}

// The MariaDB capability module: registers the MariaDbAgent service (proto/agent-mariadb.proto).
// Commands that change state run through the op ledger, so a retried op_id returns the
// first attempt's result. Failures are logged without request bodies (they hold passwords).

import type * as grpc from '@grpc/grpc-js';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../server';
import { streamBackupHandler } from './backup-stream';
import { installInstance } from './install';
import { checkPort } from './instance-layout';
import { layoutOf, removeInstance, startInstance, stopInstance } from './lifecycle';
import { probeInstance } from './probe';
import { MariaDbAgentService, type MariaDbInstallRequest, type MariaDbInstanceCommand, type MariaDbProbeRequest, type MariaDbRebuildRequest, type MariaDbReplicationRequest, type MariaDbVariablesRequest } from './proto';
import { rebuildStandby } from './rebuild';
import { configureReplication } from './replication';
import { readVariables } from './variables';

/** op_ids are per capability: the same id sent to Install and Start names two operations. */
function once<T>(ctx: AgentContext, kind: string, opId: string, operation: () => Promise<T>): Promise<T> {
  return ctx.ops.run(`mariadb.${kind}.${opId}`, operation);
}

export const mariadbModule: CapabilityModule = {
  name: 'mariadb',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'mariadb' });
    server.addService(MariaDbAgentService.service, {
      Install: unary(log, 'MariaDb.Install', (req: MariaDbInstallRequest) => once(ctx, 'install', req.op_id, () => installInstance(ctx, req))),
      Start: unary(log, 'MariaDb.Start', (req: MariaDbInstanceCommand) =>
        once(ctx, 'start', req.op_id, async () => startInstance(ctx, await layoutOf(ctx, checkPort(req.port)))),
      ),
      Stop: unary(log, 'MariaDb.Stop', (req: MariaDbInstanceCommand) =>
        once(ctx, 'stop', req.op_id, async () => stopInstance(ctx, await layoutOf(ctx, checkPort(req.port)))),
      ),
      Remove: unary(log, 'MariaDb.Remove', (req: MariaDbInstanceCommand) => once(ctx, 'remove', req.op_id, () => removeInstance(ctx, checkPort(req.port)))),
      ConfigureReplication: unary(log, 'MariaDb.ConfigureReplication', (req: MariaDbReplicationRequest) =>
        once(ctx, 'replication', req.op_id, () => configureReplication(ctx, req)),
      ),
      RebuildStandby: unary(log, 'MariaDb.RebuildStandby', (req: MariaDbRebuildRequest) => once(ctx, 'rebuild', req.op_id, () => rebuildStandby(ctx, req))),
      StreamBackup: streamBackupHandler({ ...ctx, logger: log }),
      GetVariables: unary(log, 'MariaDb.GetVariables', (req: MariaDbVariablesRequest) => readVariables(ctx, req)),
      Probe: unary(log, 'MariaDb.Probe', (req: MariaDbProbeRequest) => probeInstance(ctx, req.port)),
    });
  },
};

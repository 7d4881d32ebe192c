// The PostgresAgent service: compute instances on this host. Commands that change state go
// through the op ledger (op_id replay) and run one at a time per instance.

import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { unary } from '../../grpc-unary';
import type { AgentContext, CapabilityModule } from '../../capability';
import { osUser, type RunAs } from '../../ops/exec';
import { InstanceLocks, InstanceRegistry, POSTGRES_OS_USER } from './layout';
import { installPostgres, removePostgres, startPostgres, stopPostgres, type PostgresHost } from './lifecycle';
import { postgresProbeReply } from '../host-probe/instance-probes';
import { postgresSupervision } from './supervision';
import { syncCatalog } from './catalog-sync';
import { getVariables, setVariables } from './variables';
import {
  PostgresAgentService,
  type GetPostgresVariablesRequest,
  type InstallPostgresRequest,
  type PostgresInstanceRequest,
  type ProbePostgresRequest,
  type SetPostgresVariablesRequest,
  type SyncCatalogRequest,
  type PreparePostgresEngineRequest,
  type UpgradePostgresEngineRequest,
} from '@kcm/agent-api';
import { prepareEngineReply } from '../engines/prepare-engine';
import { upgradePostgresEngine } from './engine-upgrade';

function hostOf(ctx: AgentContext): PostgresHost {
  let runAs: RunAs | undefined;
  return {
    hostaddr: ctx.hostaddr,
    logger: ctx.logger,
    registry: new InstanceRegistry(path.join(ctx.stateDir, 'postgres')),
    engine: (version) => ctx.engines.postgres(version),
    defaultVersion: () => ctx.engines.defaultVersion('postgres'),
    runAs: () => (runAs ??= osUser(POSTGRES_OS_USER)),
  };
}

export const postgresCapability: CapabilityModule = {
  name: 'postgres',
  register(server: grpc.Server, ctx: AgentContext) {
    const host = hostOf(ctx);
    const locks = new InstanceLocks();
    /** op_id replay outside, one command per instance inside. */
    const command = <Req extends { op_id: string; port: number }, Res>(name: string, run: (req: Req) => Promise<Res>) =>
      unary(ctx.logger, name, (req: Req) => ctx.ops.run(req.op_id, () => locks.run(req.port, () => run(req))));
    // The desired state each command leaves (see ../supervisor.ts): what the supervisor keeps running.
    const desired = postgresSupervision(ctx, host, (port, work) => locks.run(port, work));
    server.addService(PostgresAgentService.service, {
      InstallPostgres: command('InstallPostgres', (req: InstallPostgresRequest) => desired.runningAfter(req.port, () => installPostgres(host, req))),
      StartPostgres: command('StartPostgres', (req: PostgresInstanceRequest) => desired.runningAfter(req.port, () => startPostgres(host, req.port))),
      StopPostgres: command('StopPostgres', async (req: PostgresInstanceRequest) => {
        await host.registry.get(req.port);
        await desired.stopped(req.port);
        return stopPostgres(host, req.port);
      }),
      RemovePostgres: command('RemovePostgres', async (req: PostgresInstanceRequest) => {
        await desired.forget(req.port);
        return removePostgres(host, req.port, req.comp_datadir ?? '');
      }),
      // Sync converges to the shards' current catalog, so a repeat is harmless; it skips the op
      // ledger because the manager syncs every few seconds and each round would leave a record.
      SyncCatalog: unary(ctx.logger, 'SyncCatalog', (req: SyncCatalogRequest) => locks.run(req.port, () => syncCatalog(host, req))),
      SetPostgresVariables: command('SetPostgresVariables', (req: SetPostgresVariablesRequest) =>
        setVariables(host, req.port, req.variables),
      ),
      ProbePostgres: unary(ctx.logger, 'ProbePostgres', (req: ProbePostgresRequest) => postgresProbeReply(ctx, host.registry, req.port)),
      GetPostgresVariables: unary(ctx.logger, 'GetPostgresVariables', (req: GetPostgresVariablesRequest) => getVariables(host.registry, req.port, req.names)),
      PreparePostgresEngine: unary(ctx.logger, 'PreparePostgresEngine', (req: PreparePostgresEngineRequest) =>
        ctx.ops.run(`postgres.prepare-engine.${req.op_id}`, () => prepareEngineReply(ctx, 'postgres', req.version)),
      ),
      // Leaves the instance running under its new engine: wanted running from then on.
      UpgradePostgresEngine: command('UpgradePostgresEngine', (req: UpgradePostgresEngineRequest) => desired.runningAfter(req.port, () => upgradePostgresEngine(host, req))),
    });
  },
};

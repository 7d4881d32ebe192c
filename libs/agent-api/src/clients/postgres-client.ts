// The manager's side of the PostgresAgent service: typed promises with deadlines.
// An unreachable agent becomes AgentUnreachableError; a failed command keeps the agent's reason.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import {
  PostgresAgentService,
  type InstallPostgresRequest,
  type PostgresInstanceReply,
  type PostgresVariablesReply,
  type PreparePostgresEngineReply,
  type UpgradePostgresEngineReply,
  type ProbePostgresReply,
  type ShardEndpoint,
  type SyncCatalogReply,
} from '../contract/postgres';

/** A download of ~20 MB and its unpacking, or a stop and start. */
const ENGINE_DEADLINE_MS = 15 * 60_000;

export class PostgresAgentClient {
  private readonly client: grpc.Client;

  /** Install and catalog sync can take tens of seconds (initdb, first import); hence the long default deadline. */
  constructor(readonly address: string, private readonly deadlineMs = 120_000) {
    this.client = agentClient(PostgresAgentService, address);
  }

  install(request: InstallPostgresRequest): Promise<PostgresInstanceReply> {
    return this.call('InstallPostgres', request);
  }

  start(opId: string, port: number): Promise<PostgresInstanceReply> {
    return this.call('StartPostgres', { op_id: opId, port });
  }

  stop(opId: string, port: number): Promise<PostgresInstanceReply> {
    return this.call('StopPostgres', { op_id: opId, port });
  }

  /** `compDatadir`: where the install put it, so a data dir the agent never recorded is removed too. */
  remove(opId: string, port: number, compDatadir = ''): Promise<PostgresInstanceReply> {
    return this.call('RemovePostgres', { op_id: opId, port, comp_datadir: compDatadir });
  }

  probe(port: number): Promise<ProbePostgresReply> {
    return this.call('ProbePostgres', { port });
  }

  syncCatalog(opId: string, port: number, shards: ShardEndpoint[]): Promise<SyncCatalogReply> {
    return this.call('SyncCatalog', { op_id: opId, port, shards });
  }

  setVariables(opId: string, port: number, variables: Record<string, string>): Promise<PostgresVariablesReply> {
    return this.call('SetPostgresVariables', { op_id: opId, port, variables });
  }

  getVariables(port: number, names: string[]): Promise<PostgresVariablesReply> {
    return this.call('GetPostgresVariables', { port, names });
  }

  /** Makes sure PostgreSQL `version` is in the host's engine cache ('' = the agent's default); UNIMPLEMENTED from an older agent. */
  prepareEngine(opId: string, version: string): Promise<PreparePostgresEngineReply> {
    return this.call('PreparePostgresEngine', { op_id: opId, version }, ENGINE_DEADLINE_MS);
  }

  /** Moves the instance on `port` to engine `version` (fast shutdown, switch, start); versions as measured. */
  upgradeEngine(opId: string, port: number, version: string): Promise<UpgradePostgresEngineReply> {
    return this.call('UpgradePostgresEngine', { op_id: opId, port, version }, ENGINE_DEADLINE_MS);
  }

  close(): void {
    this.client.close();
  }

  private call<Res>(method: string, request: object, deadlineMs = this.deadlineMs): Promise<Res> {
    return callUnary<Res>(this.client, this.address, method, request, deadlineMs);
  }
}

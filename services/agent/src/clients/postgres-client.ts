// The manager's side of the PostgresAgent service: typed promises with deadlines.
// An unreachable agent becomes AgentUnreachableError; a failed command keeps the agent's reason.

import * as grpc from '@grpc/grpc-js';
import { AgentUnreachableError } from '../client';
import {
  PostgresAgentService,
  type InstallPostgresRequest,
  type PostgresInstanceReply,
  type PostgresVariablesReply,
  type ProbePostgresReply,
  type ShardEndpoint,
  type SyncCatalogReply,
} from '../capabilities/postgres/postgres-proto';
import { agentChannelOptions } from '../channel-options';

/** One unary call with a deadline; shared by the capability clients. */
export function callUnary<Res>(client: grpc.Client, address: string, method: string, request: object, deadlineMs: number): Promise<Res> {
  const fn = (client as unknown as Record<string, Function>)[method].bind(client);
  return new Promise<Res>((resolve, reject) => {
    fn(request, { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, reply: Res) => {
      if (!err) return resolve(reply);
      const unreachable = err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED;
      reject(unreachable ? new AgentUnreachableError(address, err) : err);
    });
  });
}

export class PostgresAgentClient {
  private readonly client: grpc.Client;

  /** Install and catalog sync can take tens of seconds (initdb, first import); hence the long default deadline. */
  constructor(readonly address: string, private readonly deadlineMs = 120_000) {
    this.client = new PostgresAgentService(address, grpc.credentials.createInsecure(), agentChannelOptions);
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

  close(): void {
    this.client.close();
  }

  private call<Res>(method: string, request: object): Promise<Res> {
    return callUnary<Res>(this.client, this.address, method, request, this.deadlineMs);
  }
}

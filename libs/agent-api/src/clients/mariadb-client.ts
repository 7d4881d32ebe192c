// The manager's side of the MariaDB capabilities: typed promises over the MariaDbAgent
// service, each with a deadline sized to the command (an install or a rebuild takes
// minutes, a probe must answer in seconds). An unreachable agent is AgentUnreachableError.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import {
  MariaDbAgentService,
  type MariaDbInstallRequest,
  type MariaDbInstanceReply,
  type MariaDbListTablesReply,
  type MariaDbPrepareEngineReply,
  type MariaDbUpgradeEngineReply,
  type MariaDbProbeReply,
  type MariaDbRebuildReply,
  type MariaDbRebuildRequest,
  type MariaDbReplicationReply,
  type MariaDbReplicationRequest,
  type MariaDbVariablesReply,
} from '../contract/mariadb';

export interface MariaDbDeadlines {
  /** Install, start, stop, remove, replication set-up. */
  commandMs: number;
  /** Rebuild and seeding: a physical copy of the whole instance at pv_limit MB/s. */
  rebuildMs: number;
  /** Probe and variables. */
  queryMs: number;
  /** PrepareEngine (a download of ~15 MB and its unpacking) and UpgradeEngine (stop, start, mariadb-upgrade). */
  engineMs: number;
}

const DEFAULT_DEADLINES: MariaDbDeadlines = { commandMs: 5 * 60_000, rebuildMs: 6 * 3600_000, queryMs: 10_000, engineMs: 15 * 60_000 };

export class MariaDbAgentClient {
  private readonly client: grpc.Client;
  private readonly deadlines: MariaDbDeadlines;

  constructor(readonly address: string, deadlines: Partial<MariaDbDeadlines> = {}) {
    this.client = agentClient(MariaDbAgentService, address);
    this.deadlines = { ...DEFAULT_DEADLINES, ...deadlines };
  }

  install(req: MariaDbInstallRequest): Promise<MariaDbInstanceReply> {
    return this.call('Install', req, this.deadlines.commandMs);
  }

  start(opId: string, port: number): Promise<MariaDbInstanceReply> {
    return this.call('Start', { op_id: opId, port }, this.deadlines.commandMs);
  }

  stop(opId: string, port: number): Promise<MariaDbInstanceReply> {
    return this.call('Stop', { op_id: opId, port }, this.deadlines.commandMs);
  }

  remove(opId: string, port: number): Promise<MariaDbInstanceReply> {
    return this.call('Remove', { op_id: opId, port }, this.deadlines.commandMs);
  }

  configureReplication(req: MariaDbReplicationRequest): Promise<MariaDbReplicationReply> {
    return this.call('ConfigureReplication', req, this.deadlines.commandMs);
  }

  /** Replaces a standby's data with a copy of a healthy member and re-attaches it (rebuild_node). */
  rebuildStandby(req: MariaDbRebuildRequest): Promise<MariaDbRebuildReply> {
    return this.call('RebuildStandby', req, this.deadlines.rebuildMs);
  }

  /**
   * Creates a new standby from a copy of a member (add_nodes): the same command as a
   * rebuild, on a port where nothing is installed yet.
   */
  seedStandby(req: MariaDbRebuildRequest): Promise<MariaDbRebuildReply> {
    return this.call('RebuildStandby', { ...req, need_backup: false }, this.deadlines.rebuildMs);
  }

  variables(port: number, names: string[] = []): Promise<MariaDbVariablesReply> {
    return this.call('GetVariables', { port, names }, this.deadlines.queryMs);
  }

  probe(port: number): Promise<MariaDbProbeReply> {
    return this.call('Probe', { port }, this.deadlines.queryMs);
  }

  /** Tables of the cluster databases (`D_$$_S`) on the instance, as `database.table`. */
  listTables(port: number): Promise<MariaDbListTablesReply> {
    return this.call('ListTables', { port }, this.deadlines.queryMs);
  }

  /**
   * Makes sure MariaDB `version` is in the host's engine cache ('' = the agent's default),
   * so a job can check every host has it before installing anything. An agent older than
   * versioned engines answers UNIMPLEMENTED (AgentCallError).
   */
  prepareEngine(opId: string, version: string): Promise<MariaDbPrepareEngineReply> {
    return this.call('PrepareEngine', { op_id: opId, version }, this.deadlines.engineMs);
  }

  /** Moves the instance on `port` to engine `version` (stop, switch, start, mariadb-upgrade); versions as measured. */
  upgradeEngine(opId: string, port: number, version: string): Promise<MariaDbUpgradeEngineReply> {
    return this.call('UpgradeEngine', { op_id: opId, port, version }, this.deadlines.engineMs);
  }

  close(): void {
    this.client.close();
  }

  private call<Res>(method: string, request: object, deadlineMs: number): Promise<Res> {
    return callUnary<Res>(this.client, this.address, method, request, deadlineMs);
  }
}

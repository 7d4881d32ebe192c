// The manager's side of the point-in-time restore capabilities (MariaDbRestoreAgent):
// binlog listing for the archiving round, and the two restore commands of cluster_restore.
// StreamBinlog is pulled by a storage agent, not by the manager, so it has no method here.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import {
  MariaDbRestoreAgentService,
  type MariaDbArchiveBinlogReply,
  type MariaDbArchiveBinlogRequest,
  type MariaDbDropClusterDatabasesReply,
  type MariaDbListBinlogsReply,
  type MariaDbReplayBinlogsReply,
  type MariaDbReplayBinlogsRequest,
  type MariaDbRestoreFullBackupReply,
  type MariaDbRestoreFullBackupRequest,
} from '../contract/mariadb-restore';

export interface MariaDbRestoreDeadlines {
  /** Listing (and flushing) binlogs: a query. */
  queryMs: number;
  /** A full restore or a replay: the whole instance's data. */
  restoreMs: number;
}

const DEFAULT_DEADLINES: MariaDbRestoreDeadlines = { queryMs: 15_000, restoreMs: 6 * 3600_000 };

export class MariaDbRestoreAgentClient {
  private readonly client: grpc.Client;
  private readonly deadlines: MariaDbRestoreDeadlines;

  constructor(readonly address: string, deadlines: Partial<MariaDbRestoreDeadlines> = {}) {
    this.client = agentClient(MariaDbRestoreAgentService, address);
    this.deadlines = { ...DEFAULT_DEADLINES, ...deadlines };
  }

  /** The instance's binlog files, oldest first; flush closes the current one first. */
  listBinlogs(port: number, flush: boolean): Promise<MariaDbListBinlogsReply> {
    return callUnary(this.client, this.address, 'ListBinlogs', { port, flush }, this.deadlines.queryMs);
  }

  /** Pushes a closed binlog file from the instance's host to backup storage. */
  archiveBinlog(req: MariaDbArchiveBinlogRequest): Promise<MariaDbArchiveBinlogReply> {
    return callUnary(this.client, this.address, 'ArchiveBinlog', req, this.deadlines.restoreMs);
  }

  restoreFullBackup(req: MariaDbRestoreFullBackupRequest): Promise<MariaDbRestoreFullBackupReply> {
    return callUnary(this.client, this.address, 'RestoreFullBackup', req, this.deadlines.restoreMs);
  }

  replayBinlogs(req: MariaDbReplayBinlogsRequest): Promise<MariaDbReplayBinlogsReply> {
    return callUnary(this.client, this.address, 'ReplayBinlogs', req, this.deadlines.restoreMs);
  }

  /** Drops every `D_$$_S` database of the instance (logged, so its standbys follow). */
  dropClusterDatabases(opId: string, port: number): Promise<MariaDbDropClusterDatabasesReply> {
    return callUnary(this.client, this.address, 'DropClusterDatabases', { op_id: opId, port }, this.deadlines.queryMs * 4);
  }

  close(): void {
    this.client.close();
  }
}

// Loads proto/agent-mariadb-restore.proto at run time and states the TypeScript shapes of its
// messages as proto-loader decodes them (keepCase, longs as numbers, defaults filled).

import { loadAgentService } from '../load-proto';
import type { MariaDbAccount, MariaDbInstanceSpec } from './mariadb';

export const MariaDbRestoreAgentService = loadAgentService('agent-mariadb-restore.proto', 'MariaDbRestoreAgent');

export interface MariaDbListBinlogsRequest {
  port: number;
  /** Close the current binlog first (FLUSH BINARY LOGS). */
  flush: boolean;
}

export interface MariaDbBinlogFile {
  name: string;
  size: number;
  /** false for the file the server is writing now. */
  closed: boolean;
  /** GTID state at the start of the file (its Gtid_list event). */
  start_gtid_state: string;
  /** Unix seconds of the first and last events. */
  first_event_time: number;
  last_event_time: number;
}

export interface MariaDbListBinlogsReply {
  files: MariaDbBinlogFile[];
  server_id: number;
}

export interface MariaDbStreamBinlogRequest {
  port: number;
  name: string;
}

export interface MariaDbBinlogChunk {
  data: Buffer;
}

/** An object on a backup storage: the storage agent that serves it and its key there. */
export interface MariaDbStoredObject {
  storage_agent_address: string;
  /** The storage's root directory on that agent. */
  root: string;
  key: string;
  /** How the object is compressed: '' or absent (none), 'zstd' (a backup set that recorded it). */
  compression?: string;
  /** Set (32 bytes): the object is sealed with this data key (docs/backup-encryption.md); a reader opens it, a writer seals with it. */
  data_key?: Buffer;
}

export interface MariaDbArchiveBinlogRequest {
  op_id: string;
  port: number;
  name: string;
  target: MariaDbStoredObject;
  /** Recorded in the manifest beside the file's summary (a sealed binlog's wrapped data key). */
  meta?: { [name: string]: string };
}

export interface MariaDbArchiveBinlogReply {
  file: MariaDbBinlogFile;
  sha256: string;
  bytes: number;
  /** The stored object's manifest meta (a sealed binlog's wrapped data key). */
  meta?: { [name: string]: string };
}

export interface MariaDbRestoreFullBackupRequest {
  op_id: string;
  spec: MariaDbInstanceSpec;
  admin: MariaDbAccount;
  replication: MariaDbAccount;
  storage: MariaDbAccount;
  objects: MariaDbStoredObject[];
}

export interface MariaDbRestoreFullBackupReply {
  gtid_pos: string;
  bytes: number;
  pid: number;
}

export interface MariaDbReplayBinlogsRequest {
  op_id: string;
  port: number;
  binlogs: MariaDbStoredObject[];
  start_gtid: string;
  /** Unix seconds: events at or after it are not applied. */
  stop_time: number;
  /**
   * A GTID position the replay ends at, inclusive (a restore drill's point: a backup set's
   * exact position); '' or absent: stop_time only. An agent from before it ignores it.
   */
  stop_gtid?: string;
}

export interface MariaDbReplayBinlogsReply {
  gtid_pos: string;
  files: number;
  bytes: number;
}

export interface MariaDbDropClusterDatabasesRequest {
  op_id: string;
  port: number;
}

export interface MariaDbDropClusterDatabasesReply {
  dropped: string[];
}

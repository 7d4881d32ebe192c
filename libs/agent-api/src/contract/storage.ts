// Loads proto/agent-storage.proto at run time and states the TypeScript shapes of its
// messages as proto-loader decodes them (keepCase, longs as numbers, defaults filled).
// The storage agent keeps no list of storages: every request names the storage root.

import { loadAgentService } from '../load-proto';
import type { MariaDbBackupSource } from './mariadb';

export const BackupStorageAgentService = loadAgentService('agent-storage.proto', 'BackupStorageAgent');

export interface StorageOpenRequest {
  root: string;
  /** stype s3: the bucket the root names (kept in the agent's memory only). */
  s3?: S3Target | null;
}

/** An S3-compatible bucket (proto/agent-storage.proto S3Target). */
export interface S3Target {
  endpoint: string;
  region: string;
  bucket: string;
  prefix: string;
  access_key_id: string;
  secret_access_key: string;
}

export interface StorageOpenReply {
  root: string;
  free_bytes: number;
}

/** One stored object as its manifest describes it. */
export interface StorageObjectInfo {
  key: string;
  bytes: number;
  /** Hex sha256 of the object's bytes. */
  sha256: string;
  created_at_ms: number;
  /** What the writer recorded (a physical backup: gtid_pos, source, format). */
  meta: { [name: string]: string };
}

export interface StoragePullBackupRequest {
  op_id: string;
  root: string;
  key: string;
  source: MariaDbBackupSource;
  /** MB/s; 0 = unlimited. */
  pv_limit_mb: number;
  meta: { [name: string]: string };
  /** 'zstd': the source compresses the stream (over the data plane, or a source on the storage agent's own host); '' or absent: none. */
  compression?: string;
  /** Set (32 bytes): the source seals the (zstd) stream with this data key before it leaves its host; `--insecure` agents seal on the storage agent (docs/backup-encryption.md). */
  data_key?: Buffer;
}

export interface StoragePullBackupReply {
  object: StorageObjectInfo;
  gtid_pos: string;
  transfer_ms: number;
  /** Bytes of the mbstream before compression (= object.bytes when not compressed). */
  raw_bytes: number;
  /** How the stored object is compressed: '' (none) or 'zstd'. */
  compression: string;
}

export interface StoragePutHeader {
  root: string;
  key: string;
  meta: { [name: string]: string };
}

/** The first message carries header, later ones data; the last one sets commit (else nothing is stored). */
export interface StoragePutMessage {
  header?: StoragePutHeader | null;
  data: Buffer;
  commit?: boolean;
}

export interface StorageObjectRequest {
  root: string;
  key: string;
  /** Verify only: the object's data key, to check every sealed record's tag too (docs/backup-encryption.md). */
  data_key?: Buffer;
}

export interface StorageChunk {
  data: Buffer;
}

export interface StorageVerifyReply {
  key: string;
  ok: boolean;
  problem: string;
  expected_sha256: string;
  actual_sha256: string;
  expected_bytes: number;
  actual_bytes: number;
}

export interface StorageListRequest {
  root: string;
  prefix: string;
}

export interface StorageListReply {
  objects: StorageObjectInfo[];
}

export interface StorageDeleteRequest {
  op_id: string;
  root: string;
  /** Must not be empty. */
  prefix: string;
}

export interface StorageDeleteReply {
  deleted: number;
}

export const CatalogDumpAgentService = loadAgentService('agent-storage.proto', 'CatalogDumpAgent');

export interface PgSchemaDumpRequest {
  port: number;
}

export interface PgSchemaDump {
  database: string;
  /** pg_dump --schema-only's output in `format`. */
  dump: Buffer;
  /** 'custom' (what pg_restore reads); '' from agents before it: plain SQL. */
  format: string;
}

export interface PgSchemaDumpReply {
  dumps: PgSchemaDump[];
}

export interface PgSchemaRestoreRequest {
  op_id: string;
  port: number;
  database: string;
  /** A custom-format dump, as DumpPgSchema returned it. */
  dump: Buffer;
  /** The role that will own what is restored (the cluster's compute account). */
  role: string;
}

export interface PgSchemaRestoreReply {
  /** The objects restored, as `<kind> <schema> <name>`. */
  objects: string[];
  /** The instance has no such database: nothing was restored. */
  database_missing: boolean;
}

// What an S3 object writer needs of its store (s3-store.ts implements it), and the manifest
// written beside every object: kept apart so the writer and the store do not import each other.

import type { S3Client } from '@aws-sdk/client-s3';
import type { AgentFailure, StorageObjectInfo } from '@kcm/agent-api';

export const MANIFEST_SUFFIX = '.manifest.json';

export interface S3Manifest {
  key: string;
  bytes: number;
  sha256: string;
  created_at_ms: number;
  meta: Record<string, string>;
  /** How the bytes were uploaded: part sizes and sha256s, and the failed part attempts (retried, not restarted). */
  upload?: { parts: { bytes: number; sha256: string; attempts: number }[]; failed_attempts: number };
}

export interface S3Place {
  readonly client: S3Client;
  readonly root: string;
  readonly bucket: string;
  objectKey(key: string): string;
  manifestKey(key: string): string;
  spoolDirOf(key: string): string;
  failure(what: string, err: unknown): AgentFailure;
}

export function infoOf(m: S3Manifest): StorageObjectInfo {
  return { key: m.key, bytes: m.bytes, sha256: m.sha256, created_at_ms: m.created_at_ms, meta: { ...m.meta } };
}

// The interface both backup storage backends implement (store.ts picks one per root).

import { createHash } from 'node:crypto';
import { AgentFailure, type StorageObjectInfo, type StorageVerifyReply } from '@kcm/agent-api';

/** An object being written; it exists only once commit() returned (abort() leaves nothing). */
export interface StoreWriter {
  readonly key: string;
  /** Bytes written so far. */
  readonly bytes: number;
  write(data: Uint8Array): Promise<void>;
  /** The pieces in order, as one write. */
  writeAll(pieces: readonly Uint8Array[]): Promise<void>;
  commit(meta?: Record<string, string>): Promise<StorageObjectInfo>;
  abort(): Promise<void>;
}

/**
 * A backup storage's objects. Every implementation: an object appears whole or not at all
 * (its manifest is written last); read() fails at its end when the bytes do not match the
 * sha256 recorded at write time; list() is sorted by key.
 */
export interface ObjectStore {
  open(): Promise<{ root: string; free_bytes: number }>;
  writer(key: string): Promise<StoreWriter>;
  info(key: string): Promise<StorageObjectInfo>;
  read(key: string, chunkBytes?: number): AsyncGenerator<Buffer>;
  verify(key: string): Promise<StorageVerifyReply>;
  list(prefix: string): Promise<StorageObjectInfo[]>;
  delete(prefix: string): Promise<number>;
}

/**
 * `chunks` passed through, hashed as they go: when they end, their size and sha256 must be
 * what the manifest recorded at write time, else the stream fails there (every backend's read()).
 */
export async function* checkedAgainstManifest(chunks: AsyncIterable<Buffer>, manifest: { bytes: number; sha256: string }, key: string, root: string): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of chunks) {
    hash.update(chunk);
    bytes += chunk.length;
    yield chunk;
  }
  const actual = hash.digest('hex');
  if (bytes !== manifest.bytes || actual !== manifest.sha256) {
    throw new AgentFailure('failed_precondition', `object ${key} in storage ${root} is corrupt: ${bytes} bytes with sha256 ${actual}, manifest says ${manifest.bytes} bytes with sha256 ${manifest.sha256}`);
  }
}

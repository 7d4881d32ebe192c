// The interface both backup storage backends implement (store.ts picks one per root).

import type { StorageObjectInfo, StorageVerifyReply } from '@kcm/agent-api';

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

// What backup jobs store into and read from: the BackupStorage interface, and the `fs`
// implementation (a directory on a host, served by that host's agent, proto/agent-storage.proto).
//
// Jobs only ever see BackupStorage, obtained with openBackupStorage(record): an `s3`
// implementation (@aws-sdk/client-s3) is one more case there and one more class here, with
// no change to any job. What an implementation must guarantee is stated on the interface.

import { KcmError } from '@kcm/protocol';
import { isAgentUnreachable, StorageAgentClient, type MariaDbBackupSource, type StorageObjectInfo } from '@kcm/agent-api';
import type { BackupStorageRecord } from '../meta/state';
import type { SecretBox } from '../secrets/secret-box';
import { s3TargetOf } from './s3-paras';

/** One stored object as its checksum record describes it. */
export interface StoredObject {
  key: string;
  bytes: number;
  /** Hex sha256 of the bytes, computed as they were written. */
  sha256: string;
  createdAtMs: number;
  /** What the writer recorded with it (a physical backup: gtid_pos, source, format). */
  meta: Record<string, string>;
}

export interface StoredPhysicalBackup {
  object: StoredObject;
  /** The GTID position the backup is consistent with. */
  gtidPos: string;
  transferMs: number;
  /** Bytes of the mbstream before compression (= object.bytes when stored as it is). */
  rawBytes: number;
  /** How the stored object is compressed: '' (none) or 'zstd'; a restore undoes it. */
  compression: '' | 'zstd';
}

export interface ObjectCheck {
  key: string;
  ok: boolean;
  /** What is wrong when not ok. */
  problem: string;
}

/** Where an agent reads an object from itself (a restore pulls agent to agent, not through the manager). */
export interface ObjectLocation {
  stype: string;
  /** `fs`: the storage agent, `<hostaddr>:<port>`. */
  address: string;
  /** `fs`: the storage root on that host. */
  root: string;
  key: string;
}

/**
 * A backup storage. Contract of every implementation:
 * - an object appears whole or not at all: a writer that fails or a process killed midway
 *   leaves no object under the key (and an older object of the key stays whole until the
 *   new one replaces it);
 * - every object has a sha256 recorded when written; verify() recomputes it from the stored
 *   bytes, and get() fails if the bytes it served do not match;
 * - keys are `/`-separated segments of [A-Za-z0-9._=-]; list() returns objects sorted by key.
 */
export interface BackupStorage {
  readonly record: BackupStorageRecord;
  /** Creates the storage's place if needed and checks it is writable. */
  open(): Promise<{ freeBytes: number }>;
  /**
   * A physical backup (mariabackup --stream) of a MariaDB instance, taken by `source`'s
   * agent at most pvLimitMb MB/s and stored under key without a staging copy. The same
   * opId again (a resumed job) joins the first attempt or returns its result.
   * `compression` 'zstd' asks for the stream compressed at its source; what was done is in
   * the result (an implementation or a path that cannot compress stores it as it is).
   * `dataKey`: the source seals the stream with it before it leaves its host
   * (docs/backup-encryption.md; compressed then), or, from `--insecure` agents with no
   * data plane, the storage agent before it stores it; an agent that cannot seal fails.
   */
  storePhysicalBackup(opId: string, key: string, source: MariaDbBackupSource, pvLimitMb: number, meta?: Record<string, string>, compression?: '' | 'zstd', dataKey?: Buffer): Promise<StoredPhysicalBackup>;
  put(key: string, data: Uint8Array | AsyncIterable<Uint8Array>, meta?: Record<string, string>): Promise<StoredObject>;
  /** The bytes of an object; throws at the end if they do not match its checksum. */
  get(key: string): AsyncIterable<Buffer>;
  /** With `dataKey` (a sealed object's), every record's tag is checked too, where the object is (docs/backup-encryption.md). */
  verify(key: string, dataKey?: Buffer): Promise<ObjectCheck>;
  list(prefix: string): Promise<StoredObject[]>;
  delete(opId: string, prefix: string): Promise<number>;
  locate(key: string): ObjectLocation;
  close(): void;
}

/** The implementation of a registered storage's stype. */
export function openBackupStorage(record: BackupStorageRecord): BackupStorage {
  switch (record.stype) {
    case 'fs':
      return new AgentFsStorage(record);
    case 's3':
      return new AgentS3Storage(record);
    default:
      throw KcmError.of('UNSUPPORTED', `backup storage ${record.name}: stype ${JSON.stringify(record.stype)} is not supported (supported: fs, s3)`);
  }
}

/**
 * Verifies every key before anything is restored from them (a sealed one's record tags too,
 * given its data key in dataKeys); throws DATA_CHECK_FAILED naming
 * each object whose bytes no longer match its checksum (or that is missing), or
 * AGENT_UNREACHABLE at once when the storage's agent does not answer: nothing is known of
 * the objects then, and a retry may find them whole.
 */
export async function requireIntact(storage: BackupStorage, keys: readonly string[], dataKeys?: ReadonlyMap<string, Buffer>): Promise<void> {
  const bad: string[] = [];
  for (const key of keys) {
    const check = await storage.verify(key, dataKeys?.get(key)).catch((err: unknown): ObjectCheck => {
      if (isAgentUnreachable(err)) throw KcmError.of('AGENT_UNREACHABLE', `backup storage ${storage.record.name}: could not verify ${key}: ${(err as Error).message}`, { cause: err });
      return { key, ok: false, problem: err instanceof Error ? err.message : String(err) };
    });
    if (!check.ok) bad.push(`${key}: ${check.problem}`);
  }
  if (bad.length > 0) throw KcmError.of('DATA_CHECK_FAILED', `backup storage ${storage.record.name}: backup set refused, its files do not match their checksums (${bad.join('; ')})`);
}

export const storageAddress = (record: Pick<BackupStorageRecord, 'hostaddr' | 'port'>): string =>
  `${record.hostaddr.includes(':') ? `[${record.hostaddr}]` : record.hostaddr}:${record.port}`;

const objectOf = (o: StorageObjectInfo): StoredObject => ({ key: o.key, bytes: o.bytes, sha256: o.sha256, createdAtMs: o.created_at_ms, meta: { ...o.meta } });

/** stype `fs`: a directory (record.path) on record.hostaddr, through the BackupStorageAgent at hostaddr:port. */
class AgentFsStorage implements BackupStorage {
  protected readonly client: StorageAgentClient;

  constructor(readonly record: BackupStorageRecord) {
    this.client = new StorageAgentClient(storageAddress(record));
  }

  async open(): Promise<{ freeBytes: number }> {
    return { freeBytes: (await this.client.open(this.record.path)).free_bytes };
  }

  async storePhysicalBackup(opId: string, key: string, source: MariaDbBackupSource, pvLimitMb: number, meta: Record<string, string> = {}, compression: '' | 'zstd' = '', dataKey?: Buffer): Promise<StoredPhysicalBackup> {
    const reply = await this.client.pullBackup({ op_id: opId, root: this.record.path, key, source, pv_limit_mb: pvLimitMb, meta, compression, ...(dataKey ? { data_key: dataKey } : {}) });
    // An agent from before compression answers neither field: it stored the mbstream as it is.
    const stored = reply.compression === 'zstd' ? 'zstd' : '';
    return { object: objectOf(reply.object), gtidPos: reply.gtid_pos, transferMs: reply.transfer_ms, rawBytes: stored ? reply.raw_bytes : reply.object.bytes, compression: stored };
  }

  async put(key: string, data: Uint8Array | AsyncIterable<Uint8Array>, meta: Record<string, string> = {}): Promise<StoredObject> {
    return objectOf(await this.client.put(this.record.path, key, data, meta));
  }

  get(key: string): AsyncIterable<Buffer> {
    return this.client.get(this.record.path, key);
  }

  async verify(key: string, dataKey?: Buffer): Promise<ObjectCheck> {
    const reply = await this.client.verify(this.record.path, key, dataKey);
    return { key, ok: reply.ok, problem: reply.problem };
  }

  async list(prefix: string): Promise<StoredObject[]> {
    return (await this.client.list(this.record.path, prefix)).map(objectOf);
  }

  delete(opId: string, prefix: string): Promise<number> {
    return this.client.delete(opId, this.record.path, prefix);
  }

  locate(key: string): ObjectLocation {
    return { stype: 'fs', address: storageAddress(this.record), root: this.record.path, key };
  }

  close(): void {
    this.client.close();
  }
}

/** The SecretBox that opens an s3 storage's sealed secret key (the same key on every member); set once when a manager is built. */
let storageSecrets: SecretBox | undefined;

export function setBackupStorageSecrets(box: SecretBox): void {
  storageSecrets = box;
}

/**
 * stype `s3`: a bucket, written and read by the BackupStorageAgent at hostaddr:port (record.path
 * is where that agent spools uploads). Every call first opens the storage on that agent, which
 * is when the agent gets the bucket's credentials (kept in its memory only): an agent that
 * restarted since is simply told again. Then the same rpcs as `fs`, on the same root.
 */
class AgentS3Storage extends AgentFsStorage {
  private opened: Promise<{ freeBytes: number }> | undefined;

  override open(): Promise<{ freeBytes: number }> {
    const s3 = this.record.s3;
    if (!s3) throw KcmError.of('INTERNAL', `backup storage ${this.record.name} is stype s3 but has no bucket recorded`);
    if (!storageSecrets) throw KcmError.of('INTERNAL', 'no secrets box to open the s3 secret key with (setBackupStorageSecrets)');
    this.opened = this.client.open(this.record.path, s3TargetOf(s3, storageSecrets)).then((r) => ({ freeBytes: r.free_bytes }));
    this.opened.catch(() => (this.opened = undefined));
    return this.opened;
  }

  private ready(): Promise<unknown> {
    return this.opened ?? this.open();
  }

  override async storePhysicalBackup(...args: Parameters<AgentFsStorage['storePhysicalBackup']>): Promise<StoredPhysicalBackup> {
    await this.ready();
    return super.storePhysicalBackup(...args);
  }

  override async put(...args: Parameters<AgentFsStorage['put']>): Promise<StoredObject> {
    await this.ready();
    return super.put(...args);
  }

  override async *get(key: string): AsyncGenerator<Buffer> {
    await this.ready();
    yield* super.get(key);
  }

  override async verify(key: string, dataKey?: Buffer): Promise<ObjectCheck> {
    await this.ready();
    return super.verify(key, dataKey);
  }

  override async list(prefix: string): Promise<StoredObject[]> {
    await this.ready();
    return super.list(prefix);
  }

  override async delete(opId: string, prefix: string): Promise<number> {
    await this.ready();
    return super.delete(opId, prefix);
  }

  override locate(key: string): ObjectLocation {
    return { ...super.locate(key), stype: 's3' };
  }
}

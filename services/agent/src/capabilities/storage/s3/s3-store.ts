// stype s3: the objects of a backup storage in an S3-compatible bucket, written by this agent
// (the storage host's agent) with @aws-sdk/client-s3. The same contract as the fs store
// (object-store.ts): `<prefix>/<key>` holds the bytes and `<prefix>/<key>.manifest.json`
// (size, sha256, meta, the upload's parts) is written after them: the object exists only
// once its manifest does, and a reader checks the bytes against the manifest's sha256.
//
// Writes are multipart uploads (s3-writer.ts); see docs/backup-s3.md.

import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { AgentFailure, type S3Target, type StorageObjectInfo, type StorageVerifyReply } from '@kcm/agent-api';
import { checkKey, checkPrefix } from '../object-store';
import { checkedAgainstManifest, type ObjectStore } from '../store-types';
import { infoOf, MANIFEST_SUFFIX, type S3Manifest, type S3Place } from './place';
import { S3ObjectWriter, type S3WriterOptions } from './s3-writer';
import { describeS3Error } from './s3-errors';

export class S3ObjectStore implements ObjectStore, S3Place {
  readonly client: S3Client;
  /** Options a test sets (a smaller part size, a shorter retry window). */
  writerOptions: S3WriterOptions = {};

  /** `root`: the storage's directory on this host, where uploads spool their parts. */
  constructor(
    readonly root: string,
    readonly target: S3Target,
  ) {
    this.client = new S3Client({
      endpoint: target.endpoint,
      region: target.region,
      forcePathStyle: true,
      credentials: { accessKeyId: target.access_key_id, secretAccessKey: target.secret_access_key },
      // Part uploads retry themselves from their spool file (s3-writer.ts) and count it; the
      // SDK's own retries would hide the attempts. Checksums: Content-MD5 per part and the
      // manifest's sha256; the SDK's newer default CRC headers are not sent (S3-compatible
      // servers differ in what they accept).
      maxAttempts: 1,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { connectionTimeout: 10_000, requestTimeout: 120_000 },
    });
  }

  get bucket(): string {
    return this.target.bucket;
  }

  /** The bucket's key of an object key. */
  objectKey(key: string): string {
    return this.target.prefix ? `${this.target.prefix}/${key}` : key;
  }

  manifestKey(key: string): string {
    return `${this.objectKey(key)}${MANIFEST_SUFFIX}`;
  }

  /** Where uploads of this root spool their parts on this host. */
  spoolDirOf(key: string): string {
    return path.join(this.root, 's3-uploads', createHash('sha256').update(`${this.root}\0${key}`).digest('hex').slice(0, 32));
  }

  close(): void {
    this.client.destroy();
  }

  /** The failure of an S3 call, naming the bucket and what was asked; never the credentials. */
  failure(what: string, err: unknown): AgentFailure {
    if (err instanceof AgentFailure) return err;
    const { kind, text } = describeS3Error(err);
    return new AgentFailure(kind, `s3 storage ${this.target.bucket}/${this.target.prefix} at ${this.target.endpoint}: ${what} failed: ${text}`, { cause: err });
  }

  async open(): Promise<{ root: string; free_bytes: number }> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      throw this.failure('asking whether the bucket answers (HeadBucket)', err);
    }
    const probe = this.objectKey(`.kcm-write-check-${randomBytes(4).toString('hex')}`);
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: probe, Body: 'ok' }));
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: probe }));
    } catch (err) {
      throw this.failure('writing a probe object into the bucket', err);
    }
    // A bucket has no free-space figure.
    return { root: this.root, free_bytes: -1 };
  }

  async writer(key: string): Promise<S3ObjectWriter> {
    checkKey(key);
    // Replacing an object: its old manifest goes first (as in the fs store).
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.manifestKey(key) })).catch((err: unknown) => {
      throw this.failure(`removing the old manifest of ${key}`, err);
    });
    return S3ObjectWriter.create(this, key, this.writerOptions);
  }

  private async manifest(key: string): Promise<S3Manifest> {
    try {
      const reply = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.manifestKey(checkKey(key)) }));
      return JSON.parse(await reply.Body!.transformToString('utf8')) as S3Manifest;
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') throw new AgentFailure('not_found', `no object ${JSON.stringify(key)} in storage ${this.root}`);
      throw this.failure(`reading the manifest of ${key}`, err);
    }
  }

  async info(key: string): Promise<StorageObjectInfo> {
    return infoOf(await this.manifest(key));
  }

  /** The object's bytes, checked against the manifest as they are read: a mismatch fails the stream at its end. */
  async *read(key: string): AsyncGenerator<Buffer> {
    const manifest = await this.manifest(key);
    let body: Readable;
    try {
      body = (await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }))).Body as Readable;
    } catch (err) {
      throw this.failure(`reading ${key}`, err);
    }
    yield* checkedAgainstManifest(body as AsyncIterable<Buffer>, manifest, key, this.root);
  }

  async verify(key: string): Promise<StorageVerifyReply> {
    const manifest = await this.manifest(key);
    const base = { key, expected_sha256: manifest.sha256, expected_bytes: manifest.bytes };
    const hash = createHash('sha256');
    let bytes = 0;
    try {
      const body = (await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }))).Body as Readable;
      for await (const chunk of body as AsyncIterable<Buffer>) {
        hash.update(chunk);
        bytes += chunk.length;
      }
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return { ...base, ok: false, problem: `data object of ${key} is missing`, actual_sha256: '', actual_bytes: 0 };
      throw this.failure(`reading ${key}`, err);
    }
    const actual = hash.digest('hex');
    const problems: string[] = [];
    if (bytes !== manifest.bytes) problems.push(`size is ${bytes} bytes, manifest says ${manifest.bytes}`);
    if (actual !== manifest.sha256) problems.push(`sha256 is ${actual}, manifest says ${manifest.sha256}`);
    return { ...base, ok: problems.length === 0, problem: problems.join('; '), actual_sha256: actual, actual_bytes: bytes };
  }

  /** Objects (keys with a manifest) starting with prefix, sorted by key. */
  async list(prefix: string): Promise<StorageObjectInfo[]> {
    checkPrefix(prefix);
    const base = this.objectKey('');
    const keys: string[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${base}${prefix}`, ContinuationToken: token }));
        for (const o of page.Contents ?? []) if (o.Key?.endsWith(MANIFEST_SUFFIX)) keys.push(o.Key.slice(base.length, -MANIFEST_SUFFIX.length));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (err) {
      throw this.failure(`listing ${JSON.stringify(prefix)}`, err);
    }
    const found: StorageObjectInfo[] = [];
    for (const key of keys) {
      const info = await this.info(key).catch(() => undefined); // a manifest removed meanwhile
      if (info) found.push(info);
    }
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** Deletes the objects starting with prefix: the manifest first (the object is gone), then its bytes. */
  async delete(prefix: string): Promise<number> {
    const objects = await this.list(prefix);
    try {
      for (const o of objects) {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.manifestKey(o.key) }));
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(o.key) }));
      }
    } catch (err) {
      throw this.failure(`deleting ${JSON.stringify(prefix)}`, err);
    }
    return objects.length;
  }
}

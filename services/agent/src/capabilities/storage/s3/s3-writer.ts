// One object being written to an S3 bucket: a multipart upload whose parts are spooled to the
// agent's disk first. How a resumed part gets its bytes again: the stream's bytes are appended
// to the current part's spool file (<agent state>/s3-uploads/<id>/part-<n>) and hashed as they
// pass; a full part is uploaded from that file (Content-MD5, the answered ETag compared with the
// part's MD5) and its file removed only once the journal (upload-journal.ts) records it. A cut
// connection fails that part's request: it is sent again from its file, same part number, same
// upload id, with backoff, for up to retryWindowMs; recorded parts are never sent again.
// The source stream is never re-read (a backup stream cannot be rewound). At most one part
// uploads while the next one or two spool; beyond that the stream waits (back-pressure on the
// source agent), so the spool holds at most three parts (24 MiB with the 8 MiB base).
//
// An agent that dies mid-upload cannot resume: its source stream is gone. The next writer of
// the key finds the journal, aborts that upload (S3 frees its parts) and removes the spool.

import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { AgentFailure, type StorageObjectInfo } from '@kcm/agent-api';
import type { StoreWriter } from '../store-types';
import { MAX_PARTS, partBytes, partPlan, type PartPlan } from './part-plan';
import { describeS3Error } from './s3-errors';
import { infoOf, type S3Manifest, type S3Place } from './place';
import { UploadJournal } from './upload-journal';

export interface S3WriterOptions {
  /** Size of the first 1000 parts (part-plan.ts); default 8 MiB. */
  basePartBytes?: number;
  /** How long one request (a part, the completion) keeps being retried after failures; default 10 min. */
  retryWindowMs?: number;
}

const META_KEY = /^[A-Za-z0-9_.-]{1,64}$/;

interface SealedPart {
  partNumber: number;
  file: string;
  bytes: number;
  md5: string;
  sha256: string;
}

export class S3ObjectWriter implements StoreWriter {
  private readonly hash = createHash('sha256');
  private written = 0;
  private partNumber = 1;
  private partFile: FileHandle | undefined;
  private partFilled = 0;
  private partMd5: Hash = createHash('md5');
  private partSha: Hash = createHash('sha256');
  /** The chain of part uploads; at most one runs at a time. */
  private uploading: Promise<void> = Promise.resolve();
  private attemptsOf = new Map<number, number>();
  private finished = false;

  private constructor(
    private readonly store: S3Place,
    readonly key: string,
    private readonly journal: UploadJournal,
    private readonly plan: PartPlan,
    private readonly retryWindowMs: number,
  ) {}

  static async create(store: S3Place, key: string, options: S3WriterOptions): Promise<S3ObjectWriter> {
    const plan = partPlan(options.basePartBytes);
    const dir = store.spoolDirOf(key);
    // What an earlier writer of the key left (its agent died mid-upload): abort that upload so
    // the bucket frees its parts, and start again (the stream that fed it is gone).
    const left = await UploadJournal.load(path.join(dir, 'journal.json')).catch(() => undefined);
    if (left) await store.client.send(new AbortMultipartUploadCommand({ Bucket: left.bucket, Key: left.objectKey, UploadId: left.uploadId })).catch(() => {});
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const objectKey = store.objectKey(key);
    let uploadId: string;
    try {
      uploadId = (await store.client.send(new CreateMultipartUploadCommand({ Bucket: store.bucket, Key: objectKey, ContentType: 'application/octet-stream' }))).UploadId!;
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw store.failure(`starting the upload of ${key}`, err);
    }
    const journal = UploadJournal.start(path.join(dir, 'journal.json'), store.bucket, objectKey, uploadId);
    await journal.save();
    return new S3ObjectWriter(store, key, journal, plan, options.retryWindowMs ?? 10 * 60_000);
  }

  get bytes(): number {
    return this.written;
  }

  /** The upload's record (upload id, parts done, failed attempts): what a test shows. */
  get record(): UploadJournal {
    return this.journal;
  }

  async write(data: Uint8Array): Promise<void> {
    let at = 0;
    while (at < data.length) {
      if (!this.partFile) await this.startPart();
      const room = partBytes(this.plan, this.partNumber) - this.partFilled;
      const piece = data.subarray(at, at + Math.min(room, data.length - at));
      let done = 0;
      while (done < piece.length) done += (await this.partFile!.write(piece, done, piece.length - done)).bytesWritten;
      this.hash.update(piece);
      this.partMd5.update(piece);
      this.partSha.update(piece);
      this.partFilled += piece.length;
      this.written += piece.length;
      at += piece.length;
      if (this.partFilled === partBytes(this.plan, this.partNumber)) await this.sealPart();
    }
  }

  async writeAll(pieces: readonly Uint8Array[]): Promise<void> {
    for (const piece of pieces) await this.write(piece);
  }

  private partPath(n: number): string {
    return path.join(this.journal.dir, `part-${n}`);
  }

  private async startPart(): Promise<void> {
    if (this.partNumber > MAX_PARTS) throw new AgentFailure('no_space', `object ${this.key} outgrew ${MAX_PARTS} parts`);
    this.partFile = await open(this.partPath(this.partNumber), 'w', 0o600);
    this.partFilled = 0;
    this.partMd5 = createHash('md5');
    this.partSha = createHash('sha256');
  }

  /** Closes the current part's file and queues its upload; waits while an earlier part still uploads (back-pressure). */
  private async sealPart(): Promise<void> {
    await this.partFile!.close();
    this.partFile = undefined;
    const part: SealedPart = { partNumber: this.partNumber, file: this.partPath(this.partNumber), bytes: this.partFilled, md5: this.partMd5.digest('hex'), sha256: this.partSha.digest('hex') };
    this.partNumber += 1;
    const previous = this.uploading;
    this.uploading = previous.then(() => this.uploadPart(part));
    this.uploading.catch(() => {}); // awaited by the next seal or by commit
    await previous;
  }

  private async uploadPart(part: SealedPart): Promise<void> {
    if (this.journal.has(part.partNumber)) return; // recorded: never sent again
    const contentMd5 = Buffer.from(part.md5, 'hex').toString('base64');
    const reply = await this.retried(`uploading part ${part.partNumber} of ${this.key}`, part.partNumber, async () => {
      const answer = await this.store.client.send(
        new UploadPartCommand({ Bucket: this.journal.bucket, Key: this.journal.objectKey, UploadId: this.journal.uploadId, PartNumber: part.partNumber, Body: createReadStream(part.file), ContentLength: part.bytes, ContentMD5: contentMd5 }),
      );
      const etag = (answer.ETag ?? '').replace(/"/g, '');
      // S3 (without SSE-KMS) and s3rver answer a part's MD5 as its ETag: a different one means other bytes arrived.
      if (/^[0-9a-f]{32}$/.test(etag) && etag !== part.md5) throw Object.assign(new Error(`part ${part.partNumber} arrived as MD5 ${etag}, sent ${part.md5}`), { name: 'PartChecksumMismatch' });
      return answer;
    });
    this.journal.completed({ partNumber: part.partNumber, bytes: part.bytes, md5: part.md5, sha256: part.sha256, etag: reply.ETag ?? '', attempts: this.attemptsOf.get(part.partNumber) ?? 1 });
    await this.journal.save();
    await rm(part.file, { force: true });
  }

  /**
   * Runs an S3 request until it succeeds, retrying what a cut connection or a busy server
   * fails with (not a refusal: a 403 or a missing upload fails at once) for retryWindowMs.
   */
  private async retried<T>(what: string, partNumber: number, request: () => Promise<T>): Promise<T> {
    const giveUpAt = Date.now() + this.retryWindowMs;
    let delayMs = 200;
    for (let attempt = 1; ; attempt++) {
      this.attemptsOf.set(partNumber, attempt);
      try {
        return await request();
      } catch (err) {
        const described = describeS3Error(err);
        const retry = (described.retryable || (err as Error).name === 'PartChecksumMismatch') && !this.finished && Date.now() < giveUpAt;
        if (!retry) throw this.store.failure(`${what} (attempt ${attempt})`, err);
        this.journal.failed();
        await this.journal.save().catch(() => {});
        await sleep(delayMs);
        delayMs = Math.min(delayMs * 2, 5000);
      }
    }
  }

  /** The last part, the completion, a check of the stored size, then the manifest: from here on the object exists. */
  async commit(meta: Record<string, string> = {}): Promise<StorageObjectInfo> {
    for (const k of Object.keys(meta)) {
      if (!META_KEY.test(k) || typeof meta[k] !== 'string' || meta[k].length > 4096) throw new AgentFailure('invalid_argument', `meta ${JSON.stringify(k)} must be a name of [A-Za-z0-9_.-] with a string of at most 4096 characters`);
    }
    // An empty object still needs one part (S3 allows the last part to be small, even empty).
    if (this.partFile || this.written === 0) {
      if (!this.partFile) await this.startPart();
      await this.sealPart();
    }
    await this.uploading;
    const { bucket, objectKey, uploadId } = this.journal;
    await this.retried(`completing the upload of ${this.key}`, 0, () =>
      this.store.client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: objectKey, UploadId: uploadId, MultipartUpload: { Parts: this.journal.completedParts() } })),
    );
    const head = await this.retried(`checking the size of ${this.key}`, 0, () => this.store.client.send(new HeadObjectCommand({ Bucket: bucket, Key: objectKey })));
    if (head.ContentLength !== this.written) throw new AgentFailure('failed_precondition', `s3 storage ${this.store.root}: ${this.key} was stored with ${head.ContentLength} bytes, ${this.written} were sent`);
    const manifest: S3Manifest = {
      key: this.key,
      bytes: this.written,
      sha256: this.hash.digest('hex'),
      created_at_ms: Date.now(),
      meta: { ...meta },
      upload: { parts: this.journal.parts.map((p) => ({ bytes: p.bytes, sha256: p.sha256, attempts: p.attempts })), failed_attempts: this.journal.failedAttempts },
    };
    await this.retried(`writing the manifest of ${this.key}`, 0, () =>
      this.store.client.send(new PutObjectCommand({ Bucket: bucket, Key: this.store.manifestKey(this.key), Body: JSON.stringify(manifest), ContentType: 'application/json' })),
    );
    this.finished = true;
    await rm(this.journal.dir, { recursive: true, force: true });
    return infoOf(manifest);
  }

  /** Drops the upload (the bucket frees its parts) and the spool; an older object of the key is untouched. */
  async abort(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.uploading.catch(() => {});
    await this.partFile?.close().catch(() => {});
    await this.store.client.send(new AbortMultipartUploadCommand({ Bucket: this.journal.bucket, Key: this.journal.objectKey, UploadId: this.journal.uploadId })).catch(() => {});
    await rm(this.journal.dir, { recursive: true, force: true });
  }
}

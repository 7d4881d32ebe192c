// The record of one multipart upload in progress, kept on the agent's disk beside the spooled
// part files (<spool>/journal.json, rewritten by temp file + rename after every part): the
// upload id and every completed part with its ETag and checksums. A part whose upload fails
// (a cut connection, a reset, a 5xx) is sent again from its spool file under the same part
// number and upload id; parts already recorded are never sent again, so an upload cut after
// part k continues at part k+1, not at part 1. The journal also counts the failed attempts,
// which is how a test (and the manifest's `upload` record) shows the resume.

import { open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

export interface PartRecord {
  partNumber: number;
  bytes: number;
  /** Hex MD5 (what S3 answers as the part's ETag, and Content-MD5 it checks) and hex sha256 of the part. */
  md5: string;
  sha256: string;
  etag: string;
  /** Attempts this part took (1 when the first went through). */
  attempts: number;
}

export interface JournalData {
  bucket: string;
  objectKey: string;
  uploadId: string;
  parts: PartRecord[];
  /** Failed part attempts, all parts together. */
  failedAttempts: number;
}

export class UploadJournal {
  private constructor(
    readonly file: string,
    private readonly data: JournalData,
  ) {}

  static start(file: string, bucket: string, objectKey: string, uploadId: string): UploadJournal {
    return new UploadJournal(file, { bucket, objectKey, uploadId, parts: [], failedAttempts: 0 });
  }

  static async load(file: string): Promise<UploadJournal | undefined> {
    try {
      return new UploadJournal(file, JSON.parse(await readFile(file, 'utf8')) as JournalData);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  get uploadId(): string {
    return this.data.uploadId;
  }

  get bucket(): string {
    return this.data.bucket;
  }

  get objectKey(): string {
    return this.data.objectKey;
  }

  get failedAttempts(): number {
    return this.data.failedAttempts;
  }

  get parts(): readonly PartRecord[] {
    return this.data.parts;
  }

  /** The part to upload next: one past the last recorded. */
  nextPartNumber(): number {
    return this.data.parts.length + 1;
  }

  has(partNumber: number): boolean {
    return this.data.parts.some((p) => p.partNumber === partNumber);
  }

  /** Records a failed attempt of a part (the part stays to be sent again). */
  failed(): void {
    this.data.failedAttempts += 1;
  }

  /** Records a completed part; parts complete in order, each once. */
  completed(part: PartRecord): void {
    if (part.partNumber !== this.nextPartNumber()) throw new Error(`part ${part.partNumber} completed out of order: part ${this.nextPartNumber()} is next`);
    this.data.parts.push({ ...part });
  }

  /** What CompleteMultipartUpload lists. */
  completedParts(): { PartNumber: number; ETag: string }[] {
    return this.data.parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag }));
  }

  toJSON(): JournalData {
    return { ...this.data, parts: this.data.parts.map((p) => ({ ...p })) };
  }

  /** Written to a temporary name, fsynced, renamed over the journal. */
  async save(): Promise<void> {
    const tmp = `${this.file}.tmp-${randomBytes(4).toString('hex')}`;
    const handle = await open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(JSON.stringify(this.data));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, this.file);
  }

  get dir(): string {
    return path.dirname(this.file);
  }
}

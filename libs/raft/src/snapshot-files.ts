// Snapshot images as files beside the log's LevelDB (in `<dir>/snapshots/`), so that an
// image of tens of megabytes never rides in a LevelDB write batch: a batch that large went
// through LevelDB's journal and memtable, and every log write queued behind it waited.
//
// The image is written a piece at a time as the state machine produces it, and read back
// a chunk at a time (the snapshot stream) or whole only to restore it: at fleet scale
// (44 MB) holding the pieces, then their join, then the stored copy kept enough external
// memory alive to set off V8's major collections on the leader during every snapshot.
//
// Crash safety comes from the order, not from the file system being kind:
//   1. the image is appended to `<name>.tmp` piece by piece, and fsynced at the end;
//   2. renamed to `<name>`, and the directory fsynced (the name is durable);
//   3. only then does LevelStorage record the name in LevelDB (a synced batch);
//   4. only after that is the previous image deleted.
// A crash before 3 leaves the old reference pointing at the old file, which is still
// there; a crash after 3 leaves the new one. Files no reference names (a `.tmp`, or an
// image whose reference never got written, or an old one not deleted yet) are removed
// when the storage opens. LevelDB ignores the subdirectory: it only touches file names
// it made itself.

import { createHash } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { ImagePieces } from './core/storage';
import { isStoredImage, type SnapshotImage, type StoredImage, type StoredImageReader } from './core/types';

const SUBDIR = 'snapshots';
const SUFFIX = '.snap';

/**
 * Pieces are gathered up to this many bytes and written with one writev, one write in
 * flight while the next pieces are produced: the pieces (about 64 KB each) never wait for
 * the disk one by one, and no more than about twice this is held at a time.
 */
export const FILE_WRITE_BYTES = 1 << 20;

/** The steps of write(), named for tests that stop a write part way (a simulated crash). 'appended' follows each write of gathered pieces. */
export type SnapshotWriteStep = 'appended' | 'written' | 'renamed';

/** What LevelDB records: the file's name and its length, checked when it is opened, and its SHA-256 (absent in references from before it was kept). */
export interface SnapshotFileRef {
  name: string;
  bytes: number;
  sha256?: Uint8Array;
}

export class SnapshotFiles {
  private readonly dir: string;
  private seq = 0;

  /** `afterStep` runs after each step of write(); a test throws from it to stop there. */
  constructor(
    storageDir: string,
    private readonly afterStep?: (step: SnapshotWriteStep) => void,
  ) {
    this.dir = join(storageDir, SUBDIR);
  }

  /**
   * Writes the image durably under a fresh name (steps 1 and 2 above), each piece as it
   * comes; the file I/O runs on libuv's threads, so the event loop is free meanwhile. On
   * any failure the partial file is removed (and open() removes it if the process died).
   */
  async write(index: number, image: ImagePieces): Promise<SnapshotFileRef> {
    await mkdir(this.dir, { recursive: true });
    // Unique per process and call, so a received snapshot and a local one never share a file.
    const name = `${String(index).padStart(16, '0')}-${process.pid}-${Date.now()}-${this.seq++}${SUFFIX}`;
    const tmp = join(this.dir, `${name}.tmp`);
    const file = await open(tmp, 'w', 0o600);
    let written: { bytes: number; sha256: Uint8Array };
    try {
      try {
        written = await this.appendPieces(file, image);
        await file.sync();
      } finally {
        await file.close();
      }
      this.afterStep?.('written');
      await rename(tmp, join(this.dir, name));
    } catch (err) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw err;
    }
    await this.syncDir();
    this.afterStep?.('renamed');
    return { name, ...written };
  }

  /** The image a reference names, to be read in pieces; checks that the file is there with its recorded length. */
  async checkedImage(ref: SnapshotFileRef): Promise<StoredImage> {
    const { size } = await stat(join(this.dir, ref.name));
    if (size !== ref.bytes) throw new Error(`snapshot file ${ref.name} holds ${size} bytes, ${ref.bytes} were written`);
    return this.image(ref);
  }

  /** The image of a file this storage has just written. */
  image(ref: SnapshotFileRef): StoredImage {
    return new SnapshotFileImage(join(this.dir, ref.name), ref);
  }

  /** Deletes every file in the snapshot directory except `keep` (none if undefined). */
  async removeAllBut(keep: string | undefined): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return; // no directory yet: nothing to remove
    }
    await Promise.all(names.filter((n) => n !== keep).map((n) => rm(join(this.dir, n), { force: true })));
  }

  async remove(name: string): Promise<void> {
    await rm(join(this.dir, name), { force: true });
  }

  private async appendPieces(file: FileHandle, image: ImagePieces): Promise<{ bytes: number; sha256: Uint8Array }> {
    const hash = createHash('sha256');
    let bytes = 0;
    let gathered: Uint8Array[] = [];
    let gatheredBytes = 0;
    let inFlight: Promise<void> | undefined;
    const writeGathered = async (): Promise<void> => {
      const buffers = gathered;
      const expected = gatheredBytes;
      gathered = [];
      gatheredBytes = 0;
      const { bytesWritten } = await file.writev(buffers);
      if (bytesWritten !== expected) throw new Error(`snapshot file: wrote ${bytesWritten} of ${expected} bytes`);
      this.afterStep?.('appended');
    };
    const flush = async (): Promise<void> => {
      await inFlight; // one write at a time: file order is piece order
      inFlight = undefined;
      if (gatheredBytes > 0) {
        inFlight = writeGathered();
        inFlight.catch(() => undefined); // awaited by the next flush or at the end
      }
    };
    try {
      for await (const piece of image instanceof Uint8Array ? [image] : image) {
        if (piece.byteLength === 0) continue;
        hash.update(piece);
        bytes += piece.byteLength;
        gathered.push(piece);
        gatheredBytes += piece.byteLength;
        if (gatheredBytes >= FILE_WRITE_BYTES) await flush();
      }
      await flush();
      await inFlight;
    } catch (err) {
      await inFlight?.catch(() => undefined); // the file is closed after this: no write may still be running
      throw err;
    }
    return { bytes, sha256: hash.digest() };
  }

  private async syncDir(): Promise<void> {
    const dir = await open(this.dir, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}

class SnapshotFileImage implements StoredImage {
  readonly byteLength: number;
  readonly sha256: Uint8Array | undefined;

  constructor(
    private readonly path: string,
    ref: SnapshotFileRef,
  ) {
    this.byteLength = ref.bytes;
    this.sha256 = ref.sha256;
  }

  async open(): Promise<StoredImageReader> {
    // An open file stays readable after the storage deletes it (a newer snapshot replaced it).
    const file = await open(this.path, 'r');
    return {
      read: async (offset, length) => {
        const buffer = Buffer.allocUnsafe(length);
        let got = 0;
        while (got < length) {
          const { bytesRead } = await file.read(buffer, got, length - got, offset + got);
          if (bytesRead === 0) throw new Error(`snapshot file ${this.path} ends at ${offset + got}, before ${offset + length}`);
          got += bytesRead;
        }
        return new Uint8Array(buffer.buffer, buffer.byteOffset, length);
      },
      close: () => file.close(),
    };
  }
}

/** The bytes a read of a stored image gives per call: the snapshot stream's chunks, and a whole read's steps. */
const READ_PIECE_BYTES = 1 << 20;

/** The image's bytes in order, `pieceBytes` at a time (the last may be shorter). */
export async function* readImagePieces(image: StoredImage, pieceBytes = READ_PIECE_BYTES, from = 0): AsyncGenerator<Uint8Array> {
  const reader = await image.open();
  try {
    for (let offset = from; offset < image.byteLength; offset += pieceBytes) {
      yield await reader.read(offset, Math.min(pieceBytes, image.byteLength - offset));
    }
  } finally {
    await reader.close();
  }
}

/**
 * The whole image in memory, for a state machine's restore (which takes one buffer): read
 * from its file in one call on libuv's threads, held only while the restore runs.
 */
export async function readImage(image: SnapshotImage): Promise<Uint8Array> {
  if (!isStoredImage(image)) return image;
  const reader = await image.open();
  try {
    return image.byteLength === 0 ? new Uint8Array(0) : await reader.read(0, image.byteLength);
  } finally {
    await reader.close();
  }
}

export function encodeSnapshotFileRef(ref: SnapshotFileRef): Uint8Array {
  const sha256 = ref.sha256 ? Buffer.from(ref.sha256).toString('hex') : undefined;
  return new TextEncoder().encode(JSON.stringify({ name: ref.name, bytes: ref.bytes, sha256 }));
}

export function decodeSnapshotFileRef(value: Uint8Array): SnapshotFileRef {
  const parsed = JSON.parse(new TextDecoder().decode(value)) as { name?: unknown; bytes?: unknown; sha256?: unknown };
  if (typeof parsed.name !== 'string' || !/^[0-9a-z.-]+$/.test(parsed.name) || typeof parsed.bytes !== 'number') {
    throw new Error('snapshot file reference is malformed');
  }
  if (parsed.sha256 !== undefined && (typeof parsed.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(parsed.sha256))) {
    throw new Error('snapshot file reference has a malformed sha256');
  }
  const sha256 = typeof parsed.sha256 === 'string' ? new Uint8Array(Buffer.from(parsed.sha256, 'hex')) : undefined;
  return { name: parsed.name, bytes: parsed.bytes, sha256 };
}

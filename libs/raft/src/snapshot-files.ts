// Snapshot images as files beside the log's LevelDB (in `<dir>/snapshots/`), so that an
// image of tens of megabytes never rides in a LevelDB write batch: a batch that large went
// through LevelDB's journal and memtable, and every log write queued behind it waited.
//
// Crash safety comes from the order, not from the file system being kind:
//   1. the image is written to `<name>.tmp` and fsynced;
//   2. renamed to `<name>`, and the directory fsynced (the name is durable);
//   3. only then does LevelStorage record the name in LevelDB (a synced batch);
//   4. only after that is the previous image deleted.
// A crash before 3 leaves the old reference pointing at the old file, which is still
// there; a crash after 3 leaves the new one. Files no reference names (a `.tmp`, or an
// image whose reference never got written, or an old one not deleted yet) are removed
// when the storage opens. LevelDB ignores the subdirectory: it only touches file names
// it made itself.

import { mkdir, open, readFile, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';

const SUBDIR = 'snapshots';
const SUFFIX = '.snap';

/** The steps of write(), named for tests that stop a write part way (a simulated crash). */
export type SnapshotWriteStep = 'written' | 'renamed';

/** What LevelDB records: the file's name and its length, checked when it is read back. */
export interface SnapshotFileRef {
  name: string;
  bytes: number;
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

  /** Writes `data` durably under a fresh name (steps 1 and 2 above). Runs on libuv's threads: the event loop is free meanwhile. */
  async write(index: number, data: Uint8Array): Promise<SnapshotFileRef> {
    await mkdir(this.dir, { recursive: true });
    // Unique per process and call, so a received snapshot and a local one never share a file.
    const name = `${String(index).padStart(16, '0')}-${process.pid}-${Date.now()}-${this.seq++}${SUFFIX}`;
    const tmp = join(this.dir, `${name}.tmp`);
    const file = await open(tmp, 'w', 0o600);
    try {
      await file.writeFile(data);
      await file.sync();
    } finally {
      await file.close();
    }
    this.afterStep?.('written');
    await rename(tmp, join(this.dir, name));
    await this.syncDir();
    this.afterStep?.('renamed');
    return { name, bytes: data.byteLength };
  }

  async read(ref: SnapshotFileRef): Promise<Uint8Array> {
    const data = await readFile(join(this.dir, ref.name));
    if (data.byteLength !== ref.bytes) {
      throw new Error(`snapshot file ${ref.name} holds ${data.byteLength} bytes, ${ref.bytes} were written`);
    }
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
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

  private async syncDir(): Promise<void> {
    const dir = await open(this.dir, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}

export function encodeSnapshotFileRef(ref: SnapshotFileRef): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ name: ref.name, bytes: ref.bytes }));
}

export function decodeSnapshotFileRef(value: Uint8Array): SnapshotFileRef {
  const parsed = JSON.parse(new TextDecoder().decode(value)) as Partial<SnapshotFileRef>;
  if (typeof parsed.name !== 'string' || !/^[0-9a-z.-]+$/.test(parsed.name) || typeof parsed.bytes !== 'number') {
    throw new Error('snapshot file reference is malformed');
  }
  return { name: parsed.name, bytes: parsed.bytes };
}

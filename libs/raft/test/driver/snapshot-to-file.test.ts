// A snapshot goes into its file a piece at a time as the state machine produces it: the
// member never holds the whole image (at 1,000 hosts 44 MB of pieces plus a 44 MB join was
// the external memory that set off the leader's major GCs during a snapshot), nor keeps it
// in memory once stored, and a restart restores it from the file.

import { readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { SnapshotMeta } from '../../src/core/types';
import { LevelStorage } from '../../src/level-storage';
import { RaftNode, type DriverTransport } from '../../src/node';
import { put, running, stopAll, TestMachine, until } from './harness';

const MiB = 1 << 20;
const dirs: string[] = [];
afterEach(async () => {
  await stopAll();
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

const loneTransport = (): DriverTransport => ({
  start: async () => {},
  stop: async () => {},
  onMessage: () => {},
  onUnreachable: () => {},
  onSnapshotStatus: () => {},
  send: () => {},
});

/** Bytes in the snapshot directory's files right now (synchronously: called between two pieces). */
function bytesOnDisk(dir: string): number {
  let names: string[];
  try {
    names = readdirSync(join(dir, 'snapshots'));
  } catch {
    return 0;
  }
  return names.reduce((sum, name) => sum + statSync(join(dir, 'snapshots', name)).size, 0);
}

/** An image of `pieces` pieces of 1 MiB (piece i filled with i + 1), noting how much of it was on disk before its last piece was produced. */
class FileWatchingMachine extends TestMachine {
  onDiskBeforeLastPiece = -1;
  restoredImage: Uint8Array | undefined;

  constructor(
    private readonly dir: string,
    private readonly pieces: number,
  ) {
    super();
  }
  snapshotChunks(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean } {
    const self = this;
    function* chunks(): Generator<Uint8Array> {
      for (let i = 0; i < self.pieces; i++) {
        if (i === self.pieces - 1) self.onDiskBeforeLastPiece = bytesOnDisk(self.dir);
        yield new Uint8Array(MiB).fill(i + 1);
      }
    }
    return { chunks: chunks(), copyOnWrite: false };
  }
  override restore(data: Uint8Array, meta: SnapshotMeta): void {
    this.restoredImage = data;
    this.applied = meta.index;
  }
}

async function startLone(dir: string, sm: TestMachine, snapshotEntries: number): Promise<RaftNode> {
  const storage = await LevelStorage.open(dir, { bootstrap: { voters: ['a'], learners: [] } });
  const node = await RaftNode.start({ id: 'a', storage, stateMachine: sm, transport: loneTransport(), tickMs: 5, electionTick: 10, snapshotEntries });
  running.push(node);
  node.campaign();
  await until(() => node.status().role === 'leader');
  return node;
}

describe('a snapshot written to its file as it is produced', () => {
  it('has its pieces in the file before the last piece is produced, keeps no image in memory once stored, and restores from the file after a restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kcm-snapshot-to-file-'));
    dirs.push(dir);
    const pieces = 12;
    const sm = new FileWatchingMachine(dir, pieces);
    const node = await startLone(dir, sm, 5);
    for (let i = 0; i < 5; i++) await node.propose(put(`k${i}`, String(i)));
    const storage = (node as unknown as { storage: LevelStorage }).storage;
    await until(() => storage.snapshot().meta.index > 0);

    // Joined in memory first, the file would not exist before the last piece.
    expect(sm.onDiskBeforeLastPiece).toBeGreaterThanOrEqual((pieces - 4) * MiB);
    // What the storage keeps for followers is the file, not the bytes.
    expect(storage.snapshot().data).not.toBeInstanceOf(Uint8Array);
    expect(storage.snapshot().data.byteLength).toBe(pieces * MiB);

    await node.stop();
    running.splice(running.indexOf(node), 1);
    const again = new FileWatchingMachine(dir, pieces);
    const restarted = await startLone(dir, again, 0);
    expect(again.restoredImage?.byteLength).toBe(pieces * MiB);
    for (let i = 0; i < pieces; i++) {
      expect(again.restoredImage![i * MiB]).toBe(i + 1);
      expect(again.restoredImage![(i + 1) * MiB - 1]).toBe(i + 1);
    }
    expect(restarted.status().applied).toBeGreaterThanOrEqual(5);
  });
});

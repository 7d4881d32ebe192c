// Snapshots off the write path: the driver never makes a log write wait for a snapshot,
// and reads a large image a piece per event-loop turn instead of in one block.

import { afterEach, describe, expect, it } from 'vitest';
import type { ConfState } from '../../src/core/types';
import { MemoryStorage, type ImagePieces } from '../../src/core/storage';
import { APPLY_AFTER_HOLD_MS_PER_TURN } from '../../src/node';
import { CountingStorage, LoopbackNetwork, TestMachine, ids, leaderOf, put, startMember, stopAll, until } from './harness';

afterEach(stopAll);

/** A storage whose snapshot writes hang until released: as a disk busy with a 100 MB image. */
class SlowSnapshotStorage extends CountingStorage {
  snapshotsStarted = 0;
  private releaseAll: (() => void)[] = [];

  static override create(voters: string[]): SlowSnapshotStorage {
    return new SlowSnapshotStorage(MemoryStorage.bootstrap(voters));
  }
  override async createSnapshot(index: number, conf: ConfState, image: ImagePieces): Promise<void> {
    this.snapshotsStarted++;
    await new Promise<void>((resolve) => this.releaseAll.push(resolve));
    await this.mem.createSnapshot(index, conf, image);
  }
  release(): void {
    for (const r of this.releaseAll.splice(0)) r();
  }
}

/** A storage that refuses every snapshot before taking a single piece (as when a leader's snapshot overtook it). */
class RefusingSnapshotStorage extends CountingStorage {
  refused = 0;
  static override create(voters: string[]): RefusingSnapshotStorage {
    return new RefusingSnapshotStorage(MemoryStorage.bootstrap(voters));
  }
  override async createSnapshot(): Promise<void> {
    this.refused++;
    throw new Error('refused before the first piece');
  }
}

/**
 * Reads its image in `pieces` pieces from the live map (not copy-on-write), counting the
 * event-loop turns that ran between them and what apply did meanwhile.
 */
class ChunkedMachine extends TestMachine {
  turnsBetweenPieces = 0;
  appliesWhileReading = 0;
  reading = false;
  lastImage: string[] = [];

  constructor(private readonly pieces: number) {
    super();
  }
  override apply(entries: Parameters<TestMachine['apply']>[0]): unknown[] {
    if (this.reading) this.appliesWhileReading++;
    return super.apply(entries);
  }
  snapshotChunks(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean } {
    const keys = [...this.map.keys()];
    const per = Math.ceil(keys.length / this.pieces);
    const self = this;
    function* chunks(): Generator<Uint8Array> {
      self.reading = true;
      const image: string[] = [];
      for (let i = 0; i < keys.length; i += per) {
        let turned = false;
        setImmediate(() => (turned = true));
        const part = keys.slice(i, i + per).map((k) => `${k}=${self.map.get(k)}`);
        image.push(...part);
        yield new TextEncoder().encode(JSON.stringify(part));
        if (turned) self.turnsBetweenPieces++;
      }
      self.lastImage = image;
      self.reading = false;
    }
    return { chunks: chunks(), copyOnWrite: false };
  }
}

/**
 * A ChunkedMachine whose apply costs `msPerEntry` of CPU once its first snapshot started (a
 * busy leader's apply and the work each acknowledgement starts), noting the most apply time
 * it spent within one event-loop turn.
 */
class SlowApplyMachine extends ChunkedMachine {
  slow = false;
  mostApplyMsInOneTurn = 0;
  private applyMsThisTurn = 0;
  private turnSeen = true;

  constructor(pieces: number, private readonly msPerEntry: number) {
    super(pieces);
  }
  override apply(entries: Parameters<TestMachine['apply']>[0]): unknown[] {
    if (this.slow) {
      if (this.turnSeen) {
        this.turnSeen = false;
        this.applyMsThisTurn = 0;
        setImmediate(() => (this.turnSeen = true));
      }
      const until = performance.now() + this.msPerEntry * entries.length;
      while (performance.now() < until); // CPU, as apply is
      this.applyMsThisTurn += this.msPerEntry * entries.length;
      this.mostApplyMsInOneTurn = Math.max(this.mostApplyMsInOneTurn, this.applyMsThisTurn);
    }
    return super.apply(entries);
  }
  /** Each piece costs 2 ms too, so the proposals below are committed while apply is held. */
  override snapshotChunks(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean } {
    this.slow = true;
    const { chunks, copyOnWrite } = super.snapshotChunks();
    function* slowly(): Generator<Uint8Array> {
      for (let piece = chunks.next(); !piece.done; piece = chunks.next()) {
        const until = performance.now() + 2;
        while (performance.now() < until);
        yield piece.value;
      }
    }
    return { chunks: slowly(), copyOnWrite };
  }
}

/**
 * Copies its map in the first pieces, then says `frozen` and reads only the copy: the
 * driver may apply again from then on. The second phase goes on (up to a bound) until an
 * apply happened during it, so a driver that waits for the last piece shows none.
 */
class FreezingMachine extends TestMachine {
  appliesBeforeFrozen = 0;
  appliesAfterFrozen = 0;
  phase: 'idle' | 'copying' | 'frozen' = 'idle';
  lastImage: string[] = [];

  override apply(entries: Parameters<TestMachine['apply']>[0]): unknown[] {
    if (this.phase === 'copying') this.appliesBeforeFrozen++;
    if (this.phase === 'frozen') this.appliesAfterFrozen++;
    return super.apply(entries);
  }
  snapshotChunks(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean; frozen: Promise<void> } {
    let onFrozen!: () => void;
    const frozen = new Promise<void>((resolve) => (onFrozen = resolve));
    const self = this;
    function* chunks(): Generator<Uint8Array> {
      self.phase = 'copying';
      const copy: string[] = [];
      for (const [k, v] of self.map) {
        copy.push(`${k}=${v}`);
        yield new Uint8Array(0);
      }
      self.phase = 'frozen';
      onFrozen();
      for (let i = 0; i < 5_000 && self.appliesAfterFrozen === 0; i++) yield new Uint8Array(0);
      self.lastImage = copy;
      yield new TextEncoder().encode(JSON.stringify(copy));
      self.phase = 'idle';
    }
    return { chunks: chunks(), copyOnWrite: false, frozen };
  }
}

describe('snapshots off the write path', () => {
  it('keeps committing and acknowledging proposals while a snapshot write is still on its way to disk', async () => {
    const net = new LoopbackNetwork();
    const members = await Promise.all(ids.map((id) => startMember(net, id, SlowSnapshotStorage.create(ids), 20)));
    const leader = await leaderOf(members);
    const storage = leader.storage as SlowSnapshotStorage;
    for (let i = 0; i < 25; i++) await leader.node.propose(put(`k${i}`, String(i)));
    await until(() => storage.snapshotsStarted > 0);
    // The snapshot write hangs; a write path that waited for it would time these out.
    const later = Array.from({ length: 30 }, (_, i) => leader.node.propose(put(`later${i}`, String(i)), { timeoutMs: 2_000 }));
    await expect(Promise.all(later)).resolves.toHaveLength(30);
    expect(leader.sm.map.get('later29')).toBe('29');
    for (const m of members) (m.storage as SlowSnapshotStorage).release();
  });

  it('reads an image a piece per event-loop turn, holds only apply meanwhile, and then applies in order', async () => {
    const net = new LoopbackNetwork();
    const machines = new Map<string, ChunkedMachine>();
    const members = await Promise.all(
      ids.map((id) => {
        const sm = new ChunkedMachine(30);
        machines.set(id, sm);
        return startMember(net, id, CountingStorage.create(ids), 60, sm);
      }),
    );
    const leader = await leaderOf(members);
    const sm = machines.get(leader.node.id)!;
    for (let i = 0; i < 59; i++) await leader.node.propose(put(`k${i}`, String(i)));
    // These land while the 30 pieces are read: written and committed, applied afterwards.
    const during = Array.from({ length: 20 }, (_, i) => leader.node.propose(put(`k${i}`, `new${i}`)));
    await Promise.all(during);
    await until(() => leader.storage.snapshot().meta.index > 0);
    expect(sm.turnsBetweenPieces).toBeGreaterThanOrEqual(29);
    expect(sm.appliesWhileReading).toBe(0);
    // The image is the state at the snapshot's index: none of the later puts are in it.
    const image = new Map(sm.lastImage.map((kv) => kv.split('=') as [string, string]));
    expect(image.size).toBe(59);
    expect([...image.values()].some((v) => v.startsWith('new'))).toBe(false);
    expect(leader.sm.map.get('k19')).toBe('new19');
  });

  it('applies again once the state machine says the pieces left no longer read the live state (frozen), before the last piece', async () => {
    const net = new LoopbackNetwork();
    const machines = new Map<string, FreezingMachine>();
    const members = await Promise.all(
      ids.map((id) => {
        const sm = new FreezingMachine();
        machines.set(id, sm);
        return startMember(net, id, CountingStorage.create(ids), 30, sm);
      }),
    );
    const leader = await leaderOf(members);
    const sm = machines.get(leader.node.id)!;
    for (let i = 0; i < 29; i++) await leader.node.propose(put(`k${i}`, String(i)));
    // The 30th entry starts the snapshot; these land while it is read.
    const during = Array.from({ length: 20 }, (_, i) => leader.node.propose(put(`k${i}`, `new${i}`)));
    await Promise.all(during);
    await until(() => leader.storage.snapshot().meta.index > 0);
    expect(sm.appliesBeforeFrozen).toBe(0);
    expect(sm.appliesAfterFrozen).toBeGreaterThan(0);
    // Still the state at the snapshot's index.
    const image = new Map(sm.lastImage.map((kv) => kv.split('=') as [string, string]));
    expect([...image.values()].some((v) => v.startsWith('new'))).toBe(false);
    expect(leader.sm.map.get('k19')).toBe('new19');
  });

  it('applies again when storage refuses a snapshot before taking its first piece (apply is not left held)', async () => {
    const net = new LoopbackNetwork();
    const members = await Promise.all(ids.map((id) => startMember(net, id, RefusingSnapshotStorage.create(ids), 10, new ChunkedMachine(5))));
    const leader = await leaderOf(members);
    for (let i = 0; i < 10; i++) await leader.node.propose(put(`k${i}`, String(i)));
    await until(() => (leader.storage as RefusingSnapshotStorage).refused > 0);
    await expect(leader.node.propose(put('after', 'refusal'), { timeoutMs: 2_000 })).resolves.toBeDefined();
    expect(leader.sm.map.get('after')).toBe('refusal');
  });

  it('applies what was committed while apply was held a few milliseconds per turn, not all in one', async () => {
    const net = new LoopbackNetwork();
    const machines = new Map<string, SlowApplyMachine>();
    const members = await Promise.all(
      ids.map((id) => {
        const sm = new SlowApplyMachine(30, 3);
        machines.set(id, sm);
        return startMember(net, id, CountingStorage.create(ids), 60, sm);
      }),
    );
    const leader = await leaderOf(members);
    for (let i = 0; i < 59; i++) await leader.node.propose(put(`k${i}`, String(i)));
    // 20 entries committed during the hold: 60 ms of apply once it ends.
    const during = Array.from({ length: 20 }, (_, i) => leader.node.propose(put(`k${i}`, `new${i}`), { timeoutMs: 5_000 }));
    await Promise.all(during);
    const sm = machines.get(leader.node.id)!;
    expect(sm.appliesWhileReading).toBe(0);
    expect(leader.sm.map.get('k19')).toBe('new19');
    // The budget, plus the one entry that crosses it.
    expect(sm.mostApplyMsInOneTurn).toBeLessThanOrEqual(APPLY_AFTER_HOLD_MS_PER_TURN + 3 + 1);
  });
});

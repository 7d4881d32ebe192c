import { createHash, randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { imageInMemory, type Message, type StoredImage } from '../../src/core/types';
import { toProtoMessage } from '../../src/codec/message-codec';
import { GrpcTransport } from '../../src/grpc-transport';
import { raftClientConstructor, type SnapshotAck } from '../../src/grpc/raft-proto';
import { Recorder, TcpProxy, freePort, loopbackBlock, startGroup, waitFor } from './helpers';
import { testCredentials } from './credentials';

const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((t) => t.stop()));
});

function snapMessage(from: string, to: string, data: Uint8Array): Message {
  return {
    type: 'Snap', from, to, term: 4,
    snapshot: { meta: { index: 1200, term: 3, conf: { voters: ['a', 'b', 'c'], learners: [] } }, data },
  };
}

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** A started receiver `b` that the sender reaches only through a TCP proxy the test controls. */
async function receiverBehindProxy(): Promise<{ address: (host: number) => string; b: Recorder; proxy: TcpProxy }> {
  const address = loopbackBlock();
  const b = new Recorder(new GrpcTransport({ ...testCredentials, id: 'b', listen: `${address(2)}:0`, peers: {} }));
  running.push(b.transport);
  await b.transport.start();
  const proxy = new TcpProxy(address(3), { host: address(2), port: Number(b.transport.address().split(':').pop()) });
  running.push({ stop: () => proxy.close() });
  await proxy.listen();
  return { address, b, proxy };
}

describe('snapshot streaming', () => {
  it('delivers a snapshot of several MB intact, once, and reports it sent', async () => {
    const [a, b] = await startGroup(['a', 'b']);
    running.push(a.transport, b.transport);
    const image = new Uint8Array(randomBytes(6 * 1024 * 1024 + 123));
    a.transport.send([snapMessage('a', 'b', image)]);

    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: true }]);
    expect(b.received).toHaveLength(1);
    const got = b.received[0];
    expect({ ...got, snapshot: { ...got.snapshot, data: undefined } }).toEqual({
      ...snapMessage('a', 'b', image), snapshot: { ...snapMessage('a', 'b', image).snapshot, data: undefined },
    });
    expect(got.snapshot?.data.byteLength).toBe(image.byteLength);
    expect(sha256(imageInMemory(got.snapshot!.data))).toBe(sha256(image));
    expect(a.transport.stats().snapshotTransfers.map((t) => t.startOffsets)).toEqual([[0]]);
  });

  it('sends a stored image whose reference predates the kept SHA-256, hashing it from the file in slices first', async () => {
    const [a, b] = await startGroup(['a', 'b']);
    running.push(a.transport, b.transport);
    const bytes = new Uint8Array(randomBytes(5 * 1024 * 1024 + 5));
    const stored: StoredImage = {
      byteLength: bytes.byteLength,
      open: async () => ({ read: async (offset, length) => bytes.slice(offset, offset + length), close: async () => undefined }),
    };
    a.transport.send([{ ...snapMessage('a', 'b', new Uint8Array(0)), snapshot: { ...snapMessage('a', 'b', new Uint8Array(0)).snapshot!, data: stored } }]);
    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: true }]);
    expect(sha256(imageInMemory(b.received[0].snapshot!.data))).toBe(sha256(bytes));
  });

  it('reports a stored image that can no longer be opened (replaced meanwhile) as a failed transfer, so the core sends a fresh one', async () => {
    const [a, b] = await startGroup(['a', 'b']);
    running.push(a.transport, b.transport);
    const gone: StoredImage = { byteLength: 10, open: async () => Promise.reject(new Error('ENOENT: no such file')) };
    a.transport.send([{ ...snapMessage('a', 'b', new Uint8Array(0)), snapshot: { ...snapMessage('a', 'b', new Uint8Array(0)).snapshot!, data: gone } }]);
    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: false }]);
    expect(b.received).toHaveLength(0);
  });

  it('sends a stored image (a snapshot file) a chunk at a time, never reading it whole, with the SHA-256 kept beside it', async () => {
    const [a, b] = await startGroup(['a', 'b']);
    running.push(a.transport, b.transport);
    const bytes = new Uint8Array(randomBytes(3 * 1024 * 1024 + 77));
    const reads: number[] = [];
    let closed = 0;
    const stored: StoredImage = {
      byteLength: bytes.byteLength,
      sha256: createHash('sha256').update(bytes).digest(),
      open: async () => ({
        read: async (offset, length) => {
          reads.push(length);
          return bytes.slice(offset, offset + length);
        },
        close: async () => {
          closed++;
        },
      }),
    };
    a.transport.send([{ ...snapMessage('a', 'b', new Uint8Array(0)), snapshot: { ...snapMessage('a', 'b', new Uint8Array(0)).snapshot!, data: stored } }]);

    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: true }]);
    expect(sha256(imageInMemory(b.received[0].snapshot!.data))).toBe(sha256(bytes));
    // Only chunk-sized reads (the default 256 KiB), no hashing pass: the SHA-256 came with the image.
    expect(Math.max(...reads)).toBeLessThanOrEqual(256 * 1024);
    expect(reads.reduce((sum, n) => sum + n, 0)).toBe(bytes.byteLength);
    expect(closed).toBe(1);
  });

  it('resumes an interrupted snapshot from the offset the receiver acknowledged, not from zero', async () => {
    // a reaches b only through the proxy, which "dies" mid-transfer and comes back.
    const { address, b, proxy } = await receiverBehindProxy();
    const a = new Recorder(new GrpcTransport({ ...testCredentials, id: 'a', listen: `${address(1)}:0`, peers: { b: proxy.address }, snapshotChunkBytes: 64 * 1024 }));
    running.push(a.transport);
    await a.transport.start();

    let forwarded = 0;
    let cut = false;
    proxy.onForwarded = (bytes) => {
      forwarded += bytes;
      if (!cut && forwarded > 3 * 1024 * 1024) {
        cut = true;
        void proxy.close().then(() => setTimeout(() => void proxy.listen(), 300));
      }
    };
    const image = new Uint8Array(randomBytes(8 * 1024 * 1024));
    a.transport.send([snapMessage('a', 'b', image)]);

    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1, 30_000);
    expect(cut).toBe(true);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: true }]);
    expect(a.unreachable).toContain('b'); // the break was reported
    const [transfer] = a.transport.stats().snapshotTransfers;
    expect(transfer.startOffsets[0]).toBe(0);
    expect(transfer.startOffsets.length).toBeGreaterThanOrEqual(2);
    const resumedFrom = transfer.startOffsets[1];
    expect(resumedFrom).toBeGreaterThan(0);
    expect(resumedFrom).toBeLessThan(image.byteLength);
    expect(b.received).toHaveLength(1);
    expect(sha256(imageInMemory(b.received[0].snapshot!.data))).toBe(sha256(image));
  });

  it('reports a transfer cut short by the peer leaving the address book as failed', async () => {
    const { address, b, proxy } = await receiverBehindProxy();
    proxy.pause(); // b reads nothing: the transfer stays in flight
    const a = new Recorder(new GrpcTransport({ ...testCredentials, id: 'a', listen: `${address(1)}:0`, peers: { b: proxy.address } }));
    running.push(a.transport);
    await a.transport.start();
    a.transport.send([snapMessage('a', 'b', new Uint8Array(4 * 1024 * 1024))]);
    await new Promise((r) => setTimeout(r, 200));
    expect(a.snapshotStatus).toEqual([]);
    a.transport.setPeers({});
    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: false }]);
    expect(b.received).toHaveLength(0);
  });

  it('refuses a snapshot whose checksum does not match, and delivers nothing', async () => {
    const [b] = await startGroup(['b']);
    running.push(b.transport);
    const RaftClient = raftClientConstructor();
    const client = new RaftClient(b.transport.address(), testCredentials.channelCredentials);
    running.push({ stop: async () => client.close() });
    const image = new Uint8Array(randomBytes(100_000));
    const call = client.sendSnapshot();
    const acks: SnapshotAck[] = [];
    const ended = new Promise<void>((resolve) => {
      call.on('data', (ack: SnapshotAck) => acks.push(ack));
      call.on('error', () => resolve());
      call.on('end', () => resolve());
    });
    const header = toProtoMessage({ ...snapMessage('a', 'b', new Uint8Array(0)) });
    call.write({ header: { message: header, totalSize: image.byteLength, sha256: createHash('sha256').update('something else').digest() } });
    call.write({ offset: 0, data: image });
    call.end();
    await ended;
    expect(acks[0]).toEqual({ offset: 0 }); // a fresh transfer: nothing held yet
    expect(acks.at(-1)?.error).toMatch(/checksum/);
    expect(acks.some((ack) => ack.done)).toBe(false);
    expect(b.received).toHaveLength(0);
  });

  it('reports a snapshot to a peer that never comes up as failed, after its attempts', async () => {
    const address = loopbackBlock();
    const deadPort = await freePort(address(2));
    const a = new Recorder(new GrpcTransport({
      ...testCredentials,
      id: 'a', listen: `${address(1)}:0`, peers: { b: `${address(2)}:${deadPort}` },
      snapshotMaxAttempts: 3, backoff: { minMs: 10, maxMs: 40 }, connectTimeoutMs: 200,
    }));
    running.push(a.transport);
    await a.transport.start();
    a.transport.send([snapMessage('a', 'b', new Uint8Array(1000))]);
    await waitFor('the snapshot status', () => a.snapshotStatus.length === 1);
    expect(a.snapshotStatus).toEqual([{ peer: 'b', ok: false }]);
    expect(a.transport.stats().snapshotTransfers[0]).toMatchObject({ ok: false, startOffsets: [] });
  });
});

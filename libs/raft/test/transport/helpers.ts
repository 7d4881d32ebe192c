// Shared by the transport tests: members on 127.0.x.y loopback addresses with free ports,
// a message collector, polling waits, and a TCP proxy that can cut a connection.

import net from 'node:net';
import { randomInt } from 'node:crypto';
import type { Message, NodeId } from '../../src/core/types';
import { GrpcTransport, type GrpcTransportOptions } from '../../src/grpc-transport';
import { testCredentials } from './credentials';

/** A random 127.0.x block per test file, so parallel test files never share addresses. */
export function loopbackBlock(): (host: number) => string {
  const block = `127.0.${randomInt(20, 250)}`;
  return (host) => `${block}.${host}`;
}

/** A port that was free a moment ago on `host` (for a peer that starts later). */
export async function freePort(host: string): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function waitFor(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Everything a transport reports, recorded in arrival order. */
export class Recorder {
  readonly received: Message[] = [];
  readonly unreachable: NodeId[] = [];
  readonly snapshotStatus: { peer: NodeId; ok: boolean }[] = [];

  constructor(readonly transport: GrpcTransport) {
    transport.onMessage((m) => this.received.push(m));
    transport.onUnreachable((peer) => this.unreachable.push(peer));
    transport.onSnapshotStatus((peer, ok) => this.snapshotStatus.push({ peer, ok }));
  }

  from(peer: NodeId): Message[] {
    return this.received.filter((m) => m.from === peer);
  }
}

export type MemberOptions = Partial<Omit<GrpcTransportOptions, 'id' | 'listen' | 'peers'>>;

/** Starts one member per id on its own loopback address, then tells each about the others. */
export async function startGroup(ids: NodeId[], options: MemberOptions = {}): Promise<Recorder[]> {
  const address = loopbackBlock();
  const members = ids.map((id, i) => new GrpcTransport({ ...testCredentials, id, listen: `${address(i + 1)}:0`, peers: {}, ...options }));
  await Promise.all(members.map((t) => t.start()));
  const book = Object.fromEntries(members.map((t) => [t.id, t.address()]));
  for (const t of members) t.setPeers(book);
  return members.map((t) => new Recorder(t));
}

export function heartbeat(from: NodeId, to: NodeId, seq: number): Message {
  return { type: 'Heartbeat', from, to, term: 1, commit: seq };
}

/**
 * Forwards TCP connections from its own address to a target. close() refuses new
 * connections and destroys the open ones (the peer "dies" from the sender's view);
 * listen() brings it back on the same port. onForwarded sees every byte count sent on.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  /** The accepted (sender-side) sockets, a subset of `sockets`. */
  private readonly senders = new Set<net.Socket>();
  port = 0;
  private paused = false;
  onForwarded: (bytes: number) => void = () => {};

  constructor(private readonly host: string, private readonly target: { host: string; port: number }) {}

  get address(): string {
    return `${this.host}:${this.port}`;
  }

  async listen(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      this.senders.add(client);
      client.on('close', () => this.senders.delete(client));
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      if (this.paused) client.pause();
      client.on('data', (chunk) => {
        this.onForwarded(chunk.length);
        upstream.write(chunk);
      });
      upstream.on('data', (chunk) => client.write(chunk));
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, this.host, () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  /** Stops reading from senders: TCP, then HTTP/2 flow control push back on them (a slow peer). */
  pause(): void {
    this.paused = true;
    for (const s of this.senders) s.pause();
  }

  resume(): void {
    this.paused = false;
    for (const s of this.senders) s.resume();
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

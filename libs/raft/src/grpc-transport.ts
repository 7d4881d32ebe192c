// Transport on gRPC (proto/raft.proto). Per peer: one long-lived SendMessages stream fed
// by a bounded queue (grpc/peer-message-stream.ts) and one resumable SendSnapshot
// transfer at a time (grpc/snapshot-sender.ts). The server side hands every message
// addressed to this member to onMessage and assembles snapshots (grpc/snapshot-receiver.ts).
//
// Nothing here ever blocks the caller: send() queues and returns; handlers are called
// from the event loop, never from inside send().

import * as grpc from '@grpc/grpc-js';
import type { Message, NodeId } from './core/types';
import type { Transport } from './transport';
import { Backoff, type BackoffOptions } from './grpc/backoff';
import { PeerMessageStream, type MessageStreamCounters } from './grpc/peer-message-stream';
import { raftClientConstructor, raftServiceDefinition, type RaftClient, type RaftServerHandlers } from './grpc/raft-proto';
import { SnapshotReceiver } from './grpc/snapshot-receiver';
import { PeerSnapshotSender, type SnapshotTransferRecord } from './grpc/snapshot-sender';

export type { SnapshotTransferRecord } from './grpc/snapshot-sender';

/** Structurally satisfied by a pino Logger. */
export interface TransportLogger {
  debug(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface GrpcTransportOptions {
  id: NodeId;
  /** 'host:port' to serve on; port 0 picks a free port (read it from address() after start()). */
  listen: string;
  /** Peer id -> 'host:port'. This member's own id may be present; it is ignored. */
  peers: Record<NodeId, string>;
  maxQueuedMessages?: number; // per peer, default 4096
  maxQueuedBytes?: number; // per peer, default 64 MiB
  maxBatchBytes?: number; // per stream write, default 4 MiB
  /** gRPC max send/receive message length, both directions. Default 128 MiB. */
  maxMessageBytes?: number;
  snapshotChunkBytes?: number; // default 256 KiB
  maxSnapshotBytes?: number; // default 1 GiB
  snapshotMaxAttempts?: number; // default 10
  snapshotStallTimeoutMs?: number; // default 30 s
  connectTimeoutMs?: number; // default 2 s
  backoff?: BackoffOptions; // default 50 ms .. 2 s with jitter
  /**
   * Required, never defaulted: the library does not choose how members authenticate each
   * other. kcm passes the ones from @kcm/agent-api's credentials module, where mutual TLS plugs in.
   */
  serverCredentials: grpc.ServerCredentials;
  /** Other gRPC services the application serves on this same address (one port per member). */
  extraServices?: readonly { definition: grpc.ServiceDefinition; implementation: grpc.UntypedServiceImplementation }[];
  /** Run before every call's handler: kcm checks the caller certificate's role there. */
  serverInterceptors?: grpc.ServerInterceptor[];
  /** Required for the same reason as serverCredentials. */
  channelCredentials: grpc.ChannelCredentials;
  /** Run around every call to the peer at `address` (kcm states and checks its protocol version there). */
  clientInterceptors?: (address: string) => grpc.Interceptor[];
  logger?: TransportLogger;
}

export interface TransportStats extends MessageStreamCounters {
  unreachableReports: number;
  batchesReceived: number;
  messagesReceived: number;
  /** Received messages whose `to` is another member (a stale address book somewhere). */
  messagesMisaddressed: number;
  messagesToUnknownPeers: number;
  snapshotsSent: number;
  snapshotsFailed: number;
  snapshotsReceived: number;
  /** The most recent snapshot transfers this member sent, oldest first. */
  snapshotTransfers: SnapshotTransferRecord[];
  peers: Record<NodeId, { address: string; state: string; queued: number }>;
}

const KEPT_TRANSFER_RECORDS = 16;
const noopLogger: TransportLogger = { debug() {}, warn() {} };

interface PeerLink {
  address: string;
  client: RaftClient;
  messages: PeerMessageStream;
  snapshots: PeerSnapshotSender;
}

export class GrpcTransport implements Transport {
  readonly id: NodeId;
  private peers: Record<NodeId, string> = {};
  private readonly links = new Map<NodeId, PeerLink>();
  private server: grpc.Server | undefined;
  private boundPort = 0;
  private stopped = false;
  private messageHandler: (m: Message) => void = () => {};
  private unreachableHandler: (peer: NodeId) => void = () => {};
  private snapshotStatusHandler: (peer: NodeId, ok: boolean) => void = () => {};
  private readonly unreachablePending = new Set<NodeId>();
  private readonly receiver: SnapshotReceiver;
  private readonly log: TransportLogger;
  private readonly counters = {
    batchesSent: 0, messagesSent: 0, messagesDropped: 0, streamsOpened: 0, unreachableReports: 0,
    batchesReceived: 0, messagesReceived: 0, messagesMisaddressed: 0, messagesToUnknownPeers: 0,
    snapshotsSent: 0, snapshotsFailed: 0, snapshotsReceived: 0,
  };
  private readonly transfers: SnapshotTransferRecord[] = [];

  constructor(private readonly options: GrpcTransportOptions) {
    this.id = options.id;
    this.log = options.logger ?? noopLogger;
    this.receiver = new SnapshotReceiver({
      selfId: options.id,
      maxSnapshotBytes: options.maxSnapshotBytes ?? 1024 ** 3,
      partialTtlMs: 10 * 60_000,
      deliver: (m) => this.messageHandler(m),
      onReceived: () => this.counters.snapshotsReceived++,
      warn: (fields, msg) => this.log.warn(fields, msg),
    });
    this.setPeers(options.peers);
  }

  async start(): Promise<void> {
    if (this.stopped) throw new Error('GrpcTransport cannot be restarted after stop()');
    if (this.server) return;
    const server = new grpc.Server({ ...this.grpcOptions(), interceptors: this.options.serverInterceptors ?? [] });
    const handlers: RaftServerHandlers = {
      SendMessages: (call, callback) => this.receiveMessages(call, callback),
      SendSnapshot: this.receiver.handle,
    };
    server.addService(raftServiceDefinition(), handlers);
    for (const extra of this.options.extraServices ?? []) server.addService(extra.definition, extra.implementation);
    this.boundPort = await new Promise<number>((resolve, reject) => {
      server.bindAsync(this.options.listen, this.options.serverCredentials, (err, port) =>
        err ? reject(err) : resolve(port),
      );
    });
    this.server = server;
  }

  /** The address peers reach this member at (with the real port when listen asked for 0). */
  address(): string {
    const host = this.options.listen.slice(0, this.options.listen.lastIndexOf(':'));
    return `${host}:${this.boundPort}`;
  }

  send(msgs: Message[]): void {
    if (this.stopped) return;
    // Group per peer so each peer's queue is touched once per call, order preserved.
    let byPeer: Map<NodeId, Message[]> | undefined;
    for (const m of msgs) {
      if (m.to === this.id) continue;
      const link = this.linkFor(m.to);
      if (!link) {
        // No address yet (a member added before setPeers caught up): the core should probe it.
        this.counters.messagesToUnknownPeers++;
        if (m.type === 'Snap') this.reportSnapshotStatus(m.to, false);
        else this.reportUnreachable(m.to, 'no address for this peer');
        continue;
      }
      if (m.type === 'Snap') {
        link.snapshots.enqueue(m);
        continue;
      }
      byPeer ??= new Map();
      const list = byPeer.get(m.to);
      if (list) list.push(m);
      else byPeer.set(m.to, [m]);
    }
    if (byPeer) for (const [peer, list] of byPeer) this.links.get(peer)?.messages.enqueue(list);
  }

  onMessage(handler: (m: Message) => void): void {
    this.messageHandler = (m) => {
      try {
        handler(m);
      } catch (err) {
        this.log.warn({ err, type: m.type, from: m.from }, 'raft message handler threw');
      }
    };
  }

  onUnreachable(handler: (peer: NodeId) => void): void {
    this.unreachableHandler = handler;
  }

  onSnapshotStatus(handler: (peer: NodeId, ok: boolean) => void): void {
    this.snapshotStatusHandler = handler;
  }

  setPeers(peers: Record<NodeId, string>): void {
    const next: Record<NodeId, string> = {};
    for (const [id, address] of Object.entries(peers)) if (id !== this.id) next[id] = address;
    this.peers = next;
    for (const [id, link] of this.links) {
      if (next[id] !== link.address) this.closeLink(id, link); // removed or moved: rebuilt on next send
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const [id, link] of this.links) this.closeLink(id, link);
    this.receiver.clear();
    const server = this.server;
    this.server = undefined;
    // Peers' streams into this server are long-lived: a graceful shutdown would wait for them.
    server?.forceShutdown();
  }

  stats(): TransportStats {
    const peers: TransportStats['peers'] = {};
    for (const [id, address] of Object.entries(this.peers)) {
      const link = this.links.get(id);
      peers[id] = { address, state: link?.messages.connectionState ?? 'idle', queued: link?.messages.queuedMessages ?? 0 };
    }
    return { ...this.counters, snapshotTransfers: [...this.transfers], peers };
  }

  private receiveMessages(
    call: grpc.ServerReadableStream<Message[], unknown>,
    callback: grpc.sendUnaryData<{ batchesReceived: number; messagesReceived: number }>,
  ): void {
    let batches = 0;
    let messages = 0;
    call.on('data', (batch: Message[]) => {
      batches++;
      messages += batch.length;
      this.counters.batchesReceived++;
      this.counters.messagesReceived += batch.length;
      for (const m of batch) {
        if (m.to === this.id) this.messageHandler(m);
        else this.counters.messagesMisaddressed++;
      }
    });
    call.on('end', () => callback(null, { batchesReceived: batches, messagesReceived: messages }));
    call.on('error', () => {}); // the sender reconnects; nothing to clean up here
  }

  private linkFor(peer: NodeId): PeerLink | undefined {
    const existing = this.links.get(peer);
    if (existing) return existing;
    const address = this.peers[peer];
    if (address === undefined) return undefined;
    const RaftClientCtor = raftClientConstructor();
    const client = new RaftClientCtor(address, this.options.channelCredentials, { ...this.grpcOptions(), interceptors: this.options.clientInterceptors?.(address) ?? [] });
    const connectTimeoutMs = this.options.connectTimeoutMs ?? 2_000;
    const onUnreachable = (reason: string) => this.reportUnreachable(peer, reason);
    const link: PeerLink = {
      address,
      client,
      messages: new PeerMessageStream(peer, client, {
        maxQueuedMessages: this.options.maxQueuedMessages ?? 4096,
        maxQueuedBytes: this.options.maxQueuedBytes ?? 64 * 1024 ** 2,
        maxBatchBytes: this.options.maxBatchBytes ?? 4 * 1024 ** 2,
        connectTimeoutMs,
        backoff: new Backoff(this.options.backoff),
        onUnreachable,
        counters: this.counters,
      }),
      snapshots: new PeerSnapshotSender(peer, client, {
        chunkBytes: this.options.snapshotChunkBytes ?? 256 * 1024,
        connectTimeoutMs,
        stallTimeoutMs: this.options.snapshotStallTimeoutMs ?? 30_000,
        maxAttempts: this.options.snapshotMaxAttempts ?? 10,
        backoff: new Backoff(this.options.backoff),
        onUnreachable,
        onStatus: (ok) => this.reportSnapshotStatus(peer, ok),
        onTransferEnd: (record) => this.recordTransfer(record),
      }),
    };
    this.links.set(peer, link);
    return link;
  }

  private closeLink(peer: NodeId, link: PeerLink): void {
    this.links.delete(peer);
    link.messages.close();
    link.snapshots.close();
    link.client.close();
  }

  /** Coalesced and deferred: a burst of failures for one peer is one call, never inside send(). */
  private reportUnreachable(peer: NodeId, reason: string): void {
    this.counters.unreachableReports++;
    this.log.debug({ peer, reason }, 'raft peer unreachable');
    if (this.unreachablePending.has(peer)) return;
    this.unreachablePending.add(peer);
    queueMicrotask(() => {
      this.unreachablePending.delete(peer);
      if (!this.stopped) this.unreachableHandler(peer);
    });
  }

  private reportSnapshotStatus(peer: NodeId, ok: boolean): void {
    if (ok) this.counters.snapshotsSent++;
    else this.counters.snapshotsFailed++;
    queueMicrotask(() => {
      if (!this.stopped) this.snapshotStatusHandler(peer, ok);
    });
  }

  private recordTransfer(record: SnapshotTransferRecord): void {
    this.transfers.push(record);
    if (this.transfers.length > KEPT_TRANSFER_RECORDS) this.transfers.shift();
    if (!record.ok) this.log.warn({ ...record }, 'snapshot transfer failed');
  }

  private grpcOptions(): grpc.ChannelOptions {
    const maxMessageBytes = this.options.maxMessageBytes ?? 128 * 1024 ** 2;
    return {
      'grpc.max_send_message_length': maxMessageBytes,
      'grpc.max_receive_message_length': maxMessageBytes,
      // The channel's own reconnects follow the same schedule as the streams'.
      'grpc.initial_reconnect_backoff_ms': this.options.backoff?.minMs ?? 50,
      'grpc.max_reconnect_backoff_ms': this.options.backoff?.maxMs ?? 2_000,
      // Notice a peer that vanished without closing its connections (power loss, SIGSTOP).
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 5_000,
      'grpc.keepalive_permit_without_calls': 1,
      // One connection per transport, not shared process-wide (several members per test process).
      'grpc.use_local_subchannel_pool': 1,
      'grpc.enable_retries': 0,
    };
  }
}

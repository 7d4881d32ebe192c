// The transport contract: how a Raft member's messages reach its peers. The driver
// (node.ts) hands it every Ready's messages and feeds what arrives into the core.
// GrpcTransport (grpc-transport.ts) is the production implementation; the simulator
// has its own in-memory one.

import type { Message, NodeId } from './core/types';

export interface Transport {
  /** Starts serving (binds the listen address). Resolves once peers can connect. */
  start(): Promise<void>;

  /**
   * Queues messages for their `to` peers and returns at once: never blocks, never awaits
   * the network, never throws for a slow or unreachable peer. Delivery is best effort and
   * in order per peer; messages may be lost (Raft tolerates loss) and a loss is reported
   * through onUnreachable. 'Snap' messages travel on their own resumable stream and are
   * answered through onSnapshotStatus.
   */
  send(msgs: Message[]): void;

  /** The handler of every message received for this member (one handler; a new call replaces it). */
  onMessage(handler: (m: Message) => void): void;

  /**
   * Called when messages to `peer` could not be delivered (connection failed or broke,
   * queue overflowed). The driver calls RawNode.reportUnreachable(peer) so the leader
   * probes that follower instead of streaming blindly.
   */
  onUnreachable(handler: (peer: NodeId) => void): void;

  /** Called once per 'Snap' message: whether the peer received and accepted the whole snapshot. */
  onSnapshotStatus(handler: (peer: NodeId, ok: boolean) => void): void;

  /** Replaces the peer address book (NodeId -> 'host:port'); this member's own id is ignored. */
  setPeers(peers: Record<NodeId, string>): void;

  /** Closes every stream and the server. Queued messages are discarded. */
  stop(): Promise<void>;
}

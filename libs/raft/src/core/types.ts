// The vocabulary shared by the pure core, the storage and transport adapters, the
// driver and the simulator. The core never does I/O: it is fed ticks and messages and
// hands back a Ready that says what to persist, send and apply (see ready.ts).

/** A member's identity: an opaque, stable string (the manager uses `host:port`). */
export type NodeId = string;

export type EntryType = 'normal' | 'conf';

/**
 * One log entry. `data` is opaque to Raft for 'normal' entries; for 'conf' entries it
 * is an encoded ConfChange (see encodeConfChange). An empty 'normal' entry is the
 * no-op a new leader appends to commit an entry of its own term.
 */
export interface Entry {
  term: number;
  index: number;
  type: EntryType;
  data: Uint8Array;
}

/** What must be on stable storage before any vote or append response leaves the process. */
export interface HardState {
  term: number;
  vote: NodeId | null;
  commit: number;
}

/** Membership. Learners receive the log but never count toward any quorum. */
export interface ConfState {
  voters: NodeId[];
  learners: NodeId[];
}

/**
 * Single-server membership changes (Raft thesis section 4.1): one at a time, each
 * takes effect on a node as soon as the entry is appended to its log (not when committed).
 */
export type ConfChangeType = 'addLearner' | 'promote' | 'remove';

export interface ConfChange {
  type: ConfChangeType;
  node: NodeId;
}

export interface SnapshotMeta {
  index: number;
  term: number;
  conf: ConfState;
}

export interface Snapshot {
  meta: SnapshotMeta;
  /** The state machine image, opaque to Raft: in memory, or in its storage's file (read it in pieces). */
  data: SnapshotImage;
}

/**
 * A snapshot image its storage keeps in a file (LevelStorage) rather than in memory: at
 * fleet scale it is tens of megabytes, and holding it for the node's life (to send it to a
 * follower some day) kept that much external memory in the process, which is what set off
 * V8's major collections during a snapshot. Read it in pieces (sent to a follower) or whole
 * (restored into the state machine) only when needed.
 */
export interface StoredImage {
  readonly byteLength: number;
  /** SHA-256 of the image, when the storage computed it as it wrote the file (the snapshot stream sends it). */
  readonly sha256?: Uint8Array;
  /**
   * Opens the image for reading. The reader keeps its bytes readable until closed, even if
   * a newer snapshot replaces this one meanwhile; it throws if the image was already replaced.
   */
  open(): Promise<StoredImageReader>;
}

export interface StoredImageReader {
  /** Exactly `length` bytes from `offset` (throws when the image is shorter). */
  read(offset: number, length: number): Promise<Uint8Array>;
  close(): Promise<void>;
}

export type SnapshotImage = Uint8Array | StoredImage;

export function isStoredImage(image: SnapshotImage): image is StoredImage {
  return !(image instanceof Uint8Array);
}

/** The image's bytes when they are in memory (MemoryStorage, the simulator, a received snapshot); throws for a stored one. */
export function imageInMemory(image: SnapshotImage): Uint8Array {
  if (isStoredImage(image)) throw new Error('this snapshot image is in a file: read it with readImage()');
  return image;
}

export type MessageType =
  | 'PreVote'
  | 'PreVoteResp'
  | 'Vote'
  | 'VoteResp'
  | 'App' // AppendEntries
  | 'AppResp'
  | 'Heartbeat'
  | 'HeartbeatResp'
  | 'Snap' // InstallSnapshot (the transport streams it in chunks)
  | 'TimeoutNow' // leadership transfer: the target campaigns at once
  | 'ReadIndex' // a follower forwards a read to the leader
  | 'ReadIndexResp';

/**
 * One Raft message. Field use by type:
 * - PreVote/Vote: term (the campaign term; for PreVote the term the sender would use),
 *   index/logTerm = candidate's last log index/term; context 'transfer' on a forced
 *   campaign after TimeoutNow so that leases/check-quorum do not reject it.
 * - App: index/logTerm = the entry before `entries`; commit = leader commit.
 * - AppResp: index = last index the follower now matches (on success) or the rejected
 *   index (on reject); rejectHint/logTerm = fast backtracking hint.
 * - Heartbeat/HeartbeatResp: commit; context carries ReadIndex round ids.
 * - Snap: snapshot. AppResp answers it.
 * - ReadIndex/ReadIndexResp: context = the caller's request id; index = read index.
 */
export interface Message {
  type: MessageType;
  from: NodeId;
  to: NodeId;
  term: number;
  logTerm?: number;
  index?: number;
  entries?: Entry[];
  commit?: number;
  reject?: boolean;
  rejectHint?: number;
  snapshot?: Snapshot;
  context?: Uint8Array;
}

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader';

/** Volatile state the driver may want to observe (leader changes). */
export interface SoftState {
  leader: NodeId | null;
  role: Role;
}

/** A completed ReadIndex request: the caller may serve its read once applied >= index. */
export interface ReadState {
  index: number;
  requestCtx: Uint8Array;
}

/**
 * Everything the driver must do: persist (hardState, entries, snapshot) with one synced
 * write when mustSync, send messages, apply snapshot and committedEntries, in the order
 * of driver-order.ts (planReady), then call advance(ready).
 */
export interface Ready {
  softState?: SoftState;
  hardState?: HardState;
  /** New entries to append to stable storage (they may overwrite a conflicting suffix). */
  entries: Entry[];
  /** A snapshot received from the leader, to persist and apply. */
  snapshot?: Snapshot;
  committedEntries: Entry[];
  messages: Message[];
  readStates: ReadState[];
  /** True when hardState term/vote or entries changed: the write must be synced. */
  mustSync: boolean;
}

/** The tunables and the injected randomness. The core has no clock: time is ticks. */
export interface RaftConfig {
  id: NodeId;
  /** Ticks without hearing from a leader before campaigning. Randomized in [n, 2n). */
  electionTick: number;
  heartbeatTick: number;
  /** Injected randomness, e.g. a seeded PRNG in the simulator. Returns [0, 1). */
  random: () => number;
  preVote?: boolean; // default true
  checkQuorum?: boolean; // default true
  /**
   * A new commit index waits for the next App or heartbeat to that follower instead of
   * going out in a message of its own (default true). Under light load the eager
   * broadcast doubles the messages per write (an App and its ack per follower just to
   * say "committed"), which is most of the CPU a write costs when writes are serial.
   * Reads stay prompt: a ReadIndex answer to a follower carries the commit index along.
   */
  lazyCommitBroadcast?: boolean;
  /** Flow control: at most this many App messages in flight per follower in replicate state. */
  maxInflightMsgs?: number; // default 256
  /** Flow control: at most this many bytes of entries in flight per follower. */
  maxInflightBytes?: number; // default 8 MiB
  /** Bytes of entries per App message. */
  maxSizePerMsg?: number; // default 1 MiB
  /** Proposals beyond this many bytes of uncommitted entries are rejected (ErrProposalOverloaded). */
  maxUncommittedEntriesSize?: number; // default 64 MiB
  /** Committed entries handed out per Ready, bounding one apply batch. */
  maxCommittedSizePerReady?: number; // default 16 MiB
  /** The last index already applied by the state machine (on restart). */
  applied?: number;
}

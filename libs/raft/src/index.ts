// @kcm/raft: the public surface. Consensus only: nothing here knows about clusters or jobs.

// Vocabulary and errors
export type {
  ConfChange,
  ConfChangeType,
  ConfState,
  Entry,
  EntryType,
  HardState,
  Message,
  MessageType,
  NodeId,
  RaftConfig,
  ReadState,
  Ready,
  Role,
  Snapshot,
  SnapshotImage,
  SnapshotMeta,
  SoftState,
  StoredImage,
  StoredImageReader,
} from './core/types';
export { imageInMemory, isStoredImage } from './core/types';
export {
  CompactedError,
  NotLeaderError,
  ProposalDroppedError,
  ProposalOverloadedError,
  RaftError,
  SnapshotOutOfDateError,
  StoppedError,
  TimeoutError,
  UnavailableError,
} from './core/errors';

// The pure core, for simulators and tests that drive it by hand
export { RawNode } from './core/raw-node';
export type { RaftStatus } from './core/status';
export { encodeConfChange, decodeConfChange } from './core/confchange';
export { MemoryStorage } from './core/storage';
export type { ImagePieces, InitialState, LogReader, PersistUpdate, Storage } from './core/storage';

// Adapters and the driver
export { LevelStorage } from './level-storage';
export { readImage } from './snapshot-files';
export type { LevelStorageOptions, WriteStats } from './level-storage';
export type { Transport } from './transport';
export { GrpcTransport } from './grpc-transport';
export type { GrpcTransportOptions, TransportStats } from './grpc-transport';
export { RaftNode } from './node';
export type { RaftNodeOptions, RaftNodeStatus, RaftNodeEvents, DriverLogger } from './node';
export type { StateMachine } from './state-machine';

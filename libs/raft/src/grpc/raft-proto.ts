// proto/raft.proto, loaded at run time by proto-loader, and the TypeScript shapes of its
// messages as proto-loader hands them over (camelCase, numbers for uint64 and enums,
// absent fields omitted). Keep these shapes in step with the .proto.
//
// SendMessages is the hot path: its requests are (de)serialised by the hand-written
// codec (codec/message-codec.ts), so that RPC carries Message[] directly.

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { assetPath } from '@kcm/common';
import type { Message } from '../core/types';
import { decodeMessageBatch, encodeMessageBatch } from '../codec/message-codec';

export const RAFT_PROTO_PATH = assetPath('proto', 'raft.proto');
const SERVICE_NAME = 'kcm.raft.v1.Raft';

export interface ProtoEntry {
  term?: number;
  index?: number;
  /** EntryType: 0 NORMAL, 1 CONF. */
  type?: number;
  data?: Uint8Array;
}

export interface ProtoConfState {
  voters?: string[];
  learners?: string[];
}

export interface ProtoSnapshot {
  meta?: { index?: number; term?: number; conf?: ProtoConfState };
  data?: Uint8Array;
}

export interface ProtoMessage {
  /** MessageType number (see the enum in raft.proto). */
  type?: number;
  from?: string;
  to?: string;
  term?: number;
  logTerm?: number;
  index?: number;
  entries?: ProtoEntry[];
  commit?: number;
  reject?: boolean;
  rejectHint?: number;
  snapshot?: ProtoSnapshot;
  context?: Uint8Array;
}

export interface StreamSummary {
  batchesReceived?: number;
  messagesReceived?: number;
}

export interface SnapshotHeader {
  message?: ProtoMessage;
  totalSize?: number;
  sha256?: Uint8Array;
}

export interface SnapshotChunk {
  header?: SnapshotHeader;
  offset?: number;
  data?: Uint8Array;
}

export interface SnapshotAck {
  offset?: number;
  done?: boolean;
  error?: string;
}

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: Number,
  defaults: false,
  oneofs: false,
};

let cachedDefinition: grpc.ServiceDefinition | undefined;

/** The Raft service, with the hand-written codec on SendMessages requests. */
export function raftServiceDefinition(): grpc.ServiceDefinition {
  if (cachedDefinition) return cachedDefinition;
  const pkg = protoLoader.loadSync(RAFT_PROTO_PATH, LOADER_OPTIONS);
  const loaded = pkg[SERVICE_NAME] as grpc.ServiceDefinition;
  const sendMessages = loaded.SendMessages;
  if (!sendMessages || !loaded.SendSnapshot) throw new Error(`${RAFT_PROTO_PATH}: ${SERVICE_NAME} lacks SendMessages/SendSnapshot`);
  cachedDefinition = {
    ...loaded,
    SendMessages: {
      ...sendMessages,
      requestSerialize: (messages: Message[]) => encodeMessageBatch(messages),
      requestDeserialize: (buf: Buffer) => decodeMessageBatch(buf),
    },
  };
  return cachedDefinition;
}

/** The proto-loader definition untouched: the reference the hand-written codec must match. */
export function protoLoaderDefinition(): grpc.ServiceDefinition {
  return protoLoader.loadSync(RAFT_PROTO_PATH, LOADER_OPTIONS)[SERVICE_NAME] as grpc.ServiceDefinition;
}

export interface RaftClient extends grpc.Client {
  sendMessages(
    options: grpc.CallOptions,
    callback: (err: grpc.ServiceError | null, summary?: StreamSummary) => void,
  ): grpc.ClientWritableStream<Message[]>;
  sendSnapshot(options?: grpc.CallOptions): grpc.ClientDuplexStream<SnapshotChunk, SnapshotAck>;
}

export type RaftClientConstructor = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => RaftClient;

export function raftClientConstructor(): RaftClientConstructor {
  return grpc.makeGenericClientConstructor(raftServiceDefinition(), 'Raft') as unknown as RaftClientConstructor;
}

export interface RaftServerHandlers extends grpc.UntypedServiceImplementation {
  SendMessages: grpc.handleClientStreamingCall<Message[], StreamSummary>;
  SendSnapshot: grpc.handleBidiStreamingCall<SnapshotChunk, SnapshotAck>;
}

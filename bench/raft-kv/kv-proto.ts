// Loads proto/raftkv.proto at run time and names the TypeScript shapes of its messages
// (kept in step with the .proto by hand; proto-loader options below fix their JS form).

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { channelCredentials } from '@kcm/agent-api';

export type KvOp = 'PUT' | 'GET';

export interface KvRequest {
  id: number;
  op: KvOp;
  key: string;
  value?: Uint8Array;
  forwarded?: boolean;
}

export interface KvRequestBatch {
  requests: KvRequest[];
}

export type KvErrorCode =
  | ''
  | 'NOT_LEADER'
  | 'NO_LEADER'
  | 'TIMEOUT'
  | 'DROPPED'
  | 'OVERLOADED'
  | 'STOPPED'
  | 'UNAVAILABLE'
  | 'INTERNAL';

export interface KvReply {
  id: number;
  error: KvErrorCode;
  message: string;
  leaderKv: string;
  index: number;
  found: boolean;
  value: Uint8Array;
}

export interface KvReplyBatch {
  replies: KvReply[];
}

export interface TransferLeaderRequest {
  to: string;
}

export interface TransferLeaderReply {
  error: '' | 'NOT_LEADER';
}

export interface StatusReply {
  id: string;
  term: number;
  vote: string;
  commit: number;
  applied: number;
  leader: string;
  role: string;
  lastIndex: number;
  storageWrites: number;
  storageSyncedWrites: number;
  keys: number;
  pid: number;
}

const protoPath = fileURLToPath(new URL('../../proto/raftkv.proto', import.meta.url));

const definition = protoLoader.loadSync(protoPath, {
  keepCase: false, // leader_kv -> leaderKv
  longs: Number, // ids and indexes stay far below 2^53
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: false,
});

interface KvServiceClient extends grpc.Client {
  Session(options?: grpc.CallOptions): grpc.ClientDuplexStream<KvRequestBatch, KvReplyBatch>;
  Status(
    req: Record<string, never>,
    options: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, reply?: StatusReply) => void,
  ): grpc.ClientUnaryCall;
  TransferLeader(
    req: TransferLeaderRequest,
    options: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, reply?: TransferLeaderReply) => void,
  ): grpc.ClientUnaryCall;
}

type KvClientConstructor = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => KvServiceClient;

const pkg = grpc.loadPackageDefinition(definition) as unknown as {
  kcm: { bench: { raftkv: { v1: { Kv: KvClientConstructor & { service: grpc.ServiceDefinition } } } } };
};

export const kvService = pkg.kcm.bench.raftkv.v1.Kv.service;

/** Channel options for long-lived, latency-sensitive streams on loopback. */
export const channelOptions: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.initial_reconnect_backoff_ms': 50,
  'grpc.max_reconnect_backoff_ms': 500,
  'grpc.enable_retries': 0,
};

export function newKvClient(address: string): KvServiceClient {
  return new pkg.kcm.bench.raftkv.v1.Kv(address, channelCredentials(), channelOptions);
}

export type { KvServiceClient };

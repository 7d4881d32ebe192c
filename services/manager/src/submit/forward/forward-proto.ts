// Loads proto/manager-forward.proto at run time (no generated code to go stale) and states
// the TypeScript shapes of its messages beside it, as proto-loader decodes them.

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { assetPath } from '@kcm/common';
import { channelCredentials, protocolClientInterceptor } from '@kcm/agent-api';

const PROTO_PATH = assetPath('proto', 'manager-forward.proto');

export interface SubmitRequest {
  id: number;
  envelope_json: string;
  request_id: string;
  forwarded_by: string;
  /** The identity the forwarding member authenticated ('' when none). */
  identity_name: string;
  identity_role: string;
  client_address: string;
}

export interface SubmitBatch {
  requests: SubmitRequest[];
}

export interface SubmitReply {
  id: number;
  job_id: string;
  error_code: number;
  error_info: string;
}

export interface SubmitReplyBatch {
  replies: SubmitReply[];
}

export interface ForwardClient extends grpc.Client {
  Submit(): grpc.ClientDuplexStream<SubmitBatch, SubmitReplyBatch>;
}

const definition = protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
const ForwardService = (grpc.loadPackageDefinition(definition) as unknown as { kcm: { manager: { v1: { Forward: grpc.ServiceClientConstructor } } } }).kcm.manager.v1.Forward;

/** The Forward service's definition, for a server to add. */
export const forwardServiceDefinition: grpc.ServiceDefinition = ForwardService.service;

export function newForwardClient(address: string): ForwardClient {
  // States this build's kcm protocol and refuses a leader of one it does not talk to (protocol-version.ts).
  const interceptors = [protocolClientInterceptor(address, { self: () => ({ kind: 'manager', name: '' }), peerKind: 'manager' })];
  return new ForwardService(address, channelCredentials(), { interceptors }) as unknown as ForwardClient;
}

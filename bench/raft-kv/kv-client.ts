// A client of one raft-kv member over one long-lived Session stream: many requests in
// flight, matched to replies by id. Used by the load generator, the kill test and by
// followers forwarding puts to the leader.
//
// Every call resolves with a KvReply, never rejects: transport failures become
// error 'UNAVAILABLE' and a missing reply error 'TIMEOUT'; both mean the outcome of a
// put is unknown (it may have been applied).

import { PipelinedStream, type PipelineError } from '../../libs/common/src/pipelined-stream';
import { newKvClient } from './kv-proto';
import type { KvErrorCode, KvReply, KvReplyBatch, KvRequest, KvRequestBatch, KvServiceClient, StatusReply, TransferLeaderReply } from './kv-proto';

export function errorReply(id: number, error: KvErrorCode, message: string, leaderKv = ''): KvReply {
  return { id, error, message, leaderKv, index: 0, found: false, value: Buffer.alloc(0) };
}

export class KvSession {
  private readonly client: KvServiceClient;
  private readonly pipeline: PipelinedStream<KvRequest, KvReply, KvRequestBatch, KvReplyBatch>;

  constructor(readonly address: string) {
    this.client = newKvClient(address);
    this.pipeline = new PipelinedStream({
      open: () => this.client.Session(),
      batch: (requests) => ({ requests }),
      replies: (batch) => batch.replies,
      peer: address,
    });
  }

  put(key: string, value: Uint8Array, options: { timeoutMs?: number; forwarded?: boolean } = {}): Promise<KvReply> {
    return this.request({ op: 'PUT', key, value, forwarded: options.forwarded ?? false }, options.timeoutMs);
  }

  get(key: string, options: { timeoutMs?: number } = {}): Promise<KvReply> {
    return this.request({ op: 'GET', key }, options.timeoutMs);
  }

  status(timeoutMs = 2_000): Promise<StatusReply> {
    return new Promise((resolve, reject) => {
      this.client.Status({}, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(err) : resolve(reply!)));
    });
  }

  /** Asks this member to hand leadership to `to`; resolves with '' when it leads and started the transfer. */
  transferLeader(to: string, timeoutMs = 2_000): Promise<TransferLeaderReply['error']> {
    return new Promise((resolve, reject) => {
      this.client.TransferLeader({ to }, { deadline: Date.now() + timeoutMs }, (err, reply) => (err ? reject(err) : resolve(reply!.error)));
    });
  }

  close(): void {
    this.pipeline.close();
    this.client.close();
  }

  private request(req: Omit<KvRequest, 'id'>, timeoutMs = 5_000): Promise<KvReply> {
    return this.pipeline.request(req, timeoutMs).catch((err: PipelineError) => errorReply(0, err.kind === 'timeout' ? 'TIMEOUT' : 'UNAVAILABLE', err.message));
  }
}

// What `kcm local up` sends on its own (backup-storage.ts, machines.ts): envelopes as user
// `local`, and a wait for a job's end by polling get_status.

import { PROTOCOL_VERSION, type ReplyEnvelope, type RequestEnvelope } from '@kcm/protocol';
import type { EmitClient } from '../http-client';

export const localEnvelope = (jobType: string, paras: Record<string, unknown>, extra: Partial<RequestEnvelope> = {}): RequestEnvelope => ({
  version: PROTOCOL_VERSION, job_id: '', job_type: jobType, timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'local', paras, ...extra,
});

/** Polls the acknowledged job until it is done or failed, or the deadline passes; the last get_status answer. */
export async function waitForLocalJob(client: EmitClient, ack: ReplyEnvelope, deadline: number): Promise<ReplyEnvelope> {
  let status = ack;
  while (Date.now() < deadline) {
    status = (await client.emit(localEnvelope('get_status', {}, { job_id: ack.job_id }))).reply;
    if (status.status === 'done' || status.status === 'failed') return status;
    await new Promise((r) => setTimeout(r, 250));
  }
  return status;
}

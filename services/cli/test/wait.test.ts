import { describe, expect, it } from 'vitest';
import type { ReplyEnvelope } from '@kcm/protocol';
import type { EmitClient } from '../src/http-client';
import type { CliIo } from '../src/io';
import { waitForJob } from '../src/wait';

const reply = (fields: Partial<ReplyEnvelope>): ReplyEnvelope => ({
  version: '1.0', error_code: '0', error_info: '', status: 'ongoing', job_id: '7', job_type: 'create_cluster', attachment: null, ...fields,
});

/** A client that answers get_status with the given replies, in order. */
function scripted(replies: ReplyEnvelope[]): EmitClient & { calls: number } {
  const client = { url: 'http://test', calls: 0, async emit() {
    const next = replies[Math.min(client.calls, replies.length - 1)];
    client.calls++;
    return { httpStatus: 200, reply: next };
  } };
  return client;
}

const quietIo: CliIo = { stdout: { write() {}, isTTY: false } as never, stderr: { write() {}, isTTY: false } as never, env: {}, sleep: async () => {} };
const view = { update() {}, note() {}, finish() {} };

describe('waiting for a job', () => {
  it('retries a get_status that itself failed (no leader, read timed out) and ends with the job', async () => {
    const client = scripted([
      reply({ status: 'failed', error_code: '4000', error_info: 'no leader', job_type: 'get_status' }),
      reply({ status: 'failed', error_code: '2002', error_info: 'read timed out', job_type: 'get_status' }),
      reply({ status: 'done' }),
    ]);
    const outcome = await waitForJob(client, '7', quietIo, { intervalMs: 1, timeoutMs: 0, view });
    expect(outcome).toMatchObject({ kind: 'finished', reply: { status: 'done' } });
    expect(client.calls).toBe(3);
  });

  it('a job that itself failed with TIMEOUT is the end, not a retry', async () => {
    const client = scripted([reply({ status: 'failed', error_code: '2002', error_info: 'step 3 of 7 timed out', job_type: 'create_cluster' })]);
    const outcome = await waitForJob(client, '7', quietIo, { intervalMs: 1, timeoutMs: 0, view });
    expect(outcome).toMatchObject({ kind: 'finished', reply: { error_info: 'step 3 of 7 timed out' } });
    expect(client.calls).toBe(1);
  });
});

// A client sending a body over the limit reads the BODY_TOO_LARGE envelope after it has
// sent the body, on a connection that is not reset under it (found by npm run fuzz:emit:
// `write EPIPE` and no reply for 2 of ~1,000 giant bodies).

import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGateway } from './helpers';

const { app } = testGateway();
let port = 0;
beforeAll(async () => {
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as { port: number }).port;
});
afterAll(() => app.close());

describe('a body announced over the limit', () => {
  it('is read to its end, then refused 413 with the envelope; the client never sees a reset', async () => {
    const chunk = Buffer.alloc(200_000, 0x61);
    const chunks = 10;
    const outcome = await new Promise<{ error: string | null; reply: string; sentAllBeforeReply: boolean }>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let reply = '';
      let sentAll = false;
      let sentAllBeforeReply = false;
      let error: string | null = null;
      socket.on('data', (d) => {
        if (reply === '') sentAllBeforeReply = sentAll;
        reply += d.toString();
      });
      socket.on('error', (err) => (error = err.message));
      socket.on('close', () => resolve({ error, reply, sentAllBeforeReply }));
      socket.write(`POST /HttpService/Emit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${chunk.length * chunks}\r\n\r\n`);
      void (async () => {
        for (let i = 0; i < chunks; i++) {
          if (socket.destroyed) return;
          socket.write(chunk);
          if (i === chunks - 1) sentAll = true;
          await new Promise((r) => setTimeout(r, 20));
        }
        setTimeout(() => socket.end(), 300);
      })();
    });
    expect(outcome.error).toBeNull();
    expect(outcome.sentAllBeforeReply).toBe(true);
    expect(outcome.reply).toMatch(/^HTTP\/1.1 413/);
    const body = JSON.parse(outcome.reply.slice(outcome.reply.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
    expect(body).toMatchObject({ version: '1.0', error_code: '1002', status: 'failed', attachment: null });
  });
});

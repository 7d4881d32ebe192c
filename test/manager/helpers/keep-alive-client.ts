// A lean HTTP client for load generators (bench/emit): node:http over a keep-alive agent.
// A POST of a create_machine envelope to a local server, 16 at a time, cost 0.6-1.0 ms of
// CPU per request with fetch (undici) and 0.19-0.38 ms with this, server side included;
// the load generator shares the machine's two cores with the managers it measures.

import http from 'node:http';
import { splitMember } from '../../../services/manager/src/members';

export interface PostOptions {
  headers: Record<string, string>;
  timeoutMs: number;
}

/** Idle pooled connections are closed before the gateway's own keep-alive timeout (fastify: 72 s) can race a reuse. */
const IDLE_SOCKET_TIMEOUT_MS = 30_000;

export class KeepAliveClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 128, timeout: IDLE_SOCKET_TIMEOUT_MS });

  /** POSTs `body` (JSON text) to `path` on `member`'s gateway and resolves with the parsed JSON reply, whatever its HTTP status. */
  postJson(member: string, path: string, body: string, opts: PostOptions): Promise<unknown> {
    const { host, port } = splitMember(member);
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host,
          port,
          path,
          method: 'POST',
          agent: this.agent,
          headers: { ...opts.headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          signal: AbortSignal.timeout(opts.timeoutMs),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            try {
              resolve(JSON.parse(text));
            } catch {
              reject(new Error(`HTTP ${res.statusCode} with a body that is not JSON: ${text.slice(0, 120)}`));
            }
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

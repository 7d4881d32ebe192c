// Looking at a listener from outside, for the HTTPS tests: which certificate a new TLS
// connection is served, what a plain-HTTP client gets back from the port, and an HTTPS
// request trusting a given CA (the global fetch cannot be given one).

import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/** The serial number of the certificate a new TLS connection to host:port is served, trusting `ca`. */
export function servedSerial(host: string, port: number, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host, port, ca }, () => {
      const serial = socket.getPeerCertificate().serialNumber;
      socket.end();
      resolve(serial);
    });
    socket.on('error', reject);
  });
}

/** Writes raw bytes to host:port (what a client configured with http:// sends) and reads the whole answer until the server closes. */
export function plainExchange(host: string, port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host, port }, () => socket.write(bytes));
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('utf8')));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

/**
 * One HTTPS request to `member` (`<host>:<port>`) trusting `ca` (none given: the system's CAs);
 * a POST when there is a body. Resolves with the status and the body text.
 */
export function httpsText(member: string, urlPath: string, opts: { ca?: Buffer; body?: string; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<{ status: number; text: string }> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: member.slice(0, member.lastIndexOf(':')),
        port: Number(member.slice(member.lastIndexOf(':') + 1)),
        path: urlPath,
        method: opts.body === undefined ? 'GET' : 'POST',
        headers: { 'content-type': 'application/json', ...opts.headers },
        ...(opts.ca ? { ca: opts.ca } : {}),
        agent: false,
        timeout: timeoutMs,
      },
      (res) => {
        let text = '';
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

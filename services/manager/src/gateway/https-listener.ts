// How Emit and the console are served: HTTPS by default, plain HTTP only on an explicit flag
// (docs/https.md). A member's certificate is `https` when the config supplies one, else its
// own `tls` certificate, which the cluster CA issued for its host.
//
// With HTTPS on, a plain-HTTP request to the port is answered 400 from its first byte, before
// anything of it is parsed: its headers (a bearer token sent by mistake in clear) are never
// read into a request, a log line or the audit trail.

import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import { createSecureContext, type Server as TlsServer } from 'node:tls';
import { KcmError, errorReply } from '@kcm/protocol';

export interface HttpsFiles {
  cert: string;
  key: string;
}

export type EmitListener =
  | { scheme: 'https'; files: HttpsFiles; from: 'https' | 'tls' }
  | { scheme: 'http'; because: string };

/** The config keys that decide it (a ManagerConfig has them all). */
export interface ListenerConfig {
  https?: HttpsFiles;
  tls?: HttpsFiles;
  plainHttp: boolean;
  insecure: boolean;
}

/**
 * Plain HTTP only when asked for (plainHttp, or the throw-away insecure mode); otherwise
 * HTTPS with the supplied certificate or the member's own. A member embedded with neither
 * (in-process tests) serves plain HTTP and says why: kcm-manager refuses to start without
 * `tls` unless insecure, so a real member always has one.
 */
export function emitListenerOf(config: ListenerConfig): EmitListener {
  if (config.plainHttp) return { scheme: 'http', because: 'plainHttp: true' };
  if (config.insecure) return { scheme: 'http', because: 'insecure mode' };
  if (config.https) return { scheme: 'https', files: { cert: config.https.cert, key: config.https.key }, from: 'https' };
  if (config.tls) return { scheme: 'https', files: { cert: config.tls.cert, key: config.tls.key }, from: 'tls' };
  return { scheme: 'http', because: 'no certificate configured (https or tls)' };
}

export class HttpsCertificateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HttpsCertificateError';
  }
}

/** A certificate and its key, read and checked to belong together. */
export interface HttpsPair {
  cert: Buffer;
  key: Buffer;
  /** The (first) certificate of the chain: what a client sees as the server's. */
  x509: X509Certificate;
}

/** Reads the pair; every problem names the file and the config key it came from. */
export function loadHttpsPair(files: HttpsFiles, configKey = 'https'): HttpsPair {
  const read = (file: string, field: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new HttpsCertificateError(`${configKey}.${field} ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
  };
  const cert = read(files.cert, 'cert');
  const key = read(files.key, 'key');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new HttpsCertificateError(`${configKey}.cert ${files.cert}: not a PEM certificate (${err instanceof Error ? err.message : String(err)})`);
  }
  try {
    // What the server itself will do with them: fails on a key of another certificate.
    createSecureContext({ cert, key });
  } catch (err) {
    throw new HttpsCertificateError(`${configKey}.key ${files.key}: not the key of ${files.cert} (${err instanceof Error ? err.message : String(err)})`);
  }
  return { cert, key, x509 };
}

/** A TLS record starts with its content type; a handshake's is 22. An HTTP request starts with a method's letter. */
const TLS_HANDSHAKE = 0x16;
/** How long a connection may stay silent before its first byte says what it speaks. */
const FIRST_BYTE_TIMEOUT_MS = 30_000;
/** How long a refused plain-HTTP client may take to close after its answer. */
const PLAIN_ANSWER_LINGER_MS = 5_000;

/**
 * Puts a look at each connection's first byte in front of the HTTPS server: a TLS handshake
 * goes on to the server's own TLS handling as before; anything else gets a fixed 400 naming
 * https:// and is closed, its bytes never parsed. The server's own 'connection' listeners are
 * taken off and called for TLS connections only (the bytes read are put back first).
 */
export function refusePlainHttp(server: TlsServer, httpsUrl: string): void {
  const tlsListeners = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const answer = plainHttpRefusal(httpsUrl);
  server.on('connection', (socket: Socket) => {
    const silent = () => socket.destroy();
    const failed = () => socket.destroy();
    socket.setTimeout(FIRST_BYTE_TIMEOUT_MS);
    socket.once('timeout', silent);
    socket.once('error', failed);
    socket.once('readable', () => {
      const first = socket.read(1) as Buffer | null;
      if (first === null) return; // closed before sending anything
      socket.setTimeout(0);
      socket.off('timeout', silent);
      socket.off('error', failed);
      if (first[0] === TLS_HANDSHAKE) {
        socket.unshift(first);
        for (const listener of tlsListeners) listener.call(server, socket);
        return;
      }
      // The rest of the request is read and dropped unparsed, so the close is a clean FIN
      // after the answer (unread bytes would make it a reset that can lose the answer).
      socket.on('error', failed);
      socket.setTimeout(PLAIN_ANSWER_LINGER_MS, silent);
      socket.resume();
      socket.end(answer);
    });
  });
}

/** The one reply a plain-HTTP request gets: the envelope, as every reply of the gateway. */
function plainHttpRefusal(httpsUrl: string): string {
  // BAD_JSON as for any other request that is not HTTP this port understands (error-replies.ts answerClientError).
  const error = KcmError.of('BAD_JSON', `this port serves HTTPS only: send the request to ${httpsUrl} (plain HTTP is off; see plainHttp in docs/https.md)`);
  const body = JSON.stringify(errorReply(error));
  return `HTTP/1.1 ${error.httpStatus} ${STATUS_CODES[error.httpStatus] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

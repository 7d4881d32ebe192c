// The agent's bulk data plane: a mutual TLS listener on the agent's gRPC port + 1, one
// connection per transfer (wire format: libs/agent-api/src/plane/frames.ts). gRPC keeps the
// control (which transfer, where to, the result); the bytes of a backup or of a stored
// object read back cross this socket, at a fraction of grpc-js's CPU per byte.
//
// Who may use it is decided exactly as on the gRPC server (tls/guard.ts): the TLS handshake
// requires a client certificate of the cluster CA (nothing else completes it), a
// manager-role certificate may ask for any transfer, an agent-role one only with a
// manager's transfer ticket naming it as holder and this agent as a target, unexpired. It
// exists only with mutual TLS: an `--insecure` agent has no plane (its peers use gRPC), and
// it starts after the credentials are loaded, like every port of the agent. A certificate
// renewed on disk is used for the next handshakes (credentials.ts onTlsReloaded).

import type { AddressInfo } from 'node:net';
import * as tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { activeTls, agentStatusOf, dataFrameHeader, endFrame, MAX_PLANE_REQUEST_BYTES, onTlsReloaded, roleOf, ticketRefusal, type PlaneRequest, type PlaneTrailer, type TlsMaterial } from '@kcm/agent-api';
import type { AgentContext } from '../capability';
import { planeHandlers, PlaneRefusal, type PlaneSink } from './handlers';

const REQUEST_TIMEOUT_MS = 10_000;
const MAX_TRANSFERS = 16;

export interface PlaneOptions {
  hostaddr: string;
  port: number;
  /** This agent's gRPC address as managers name it (`hostaddr:port`), which tickets must name. */
  self: () => string;
  ctx: AgentContext;
  /** Told of every transfer served (the agent's /metrics). */
  onTransfer?(op: string, result: 'ok' | 'failed', bytes: number): void;
}

export interface RunningPlane {
  address: string;
  close(): Promise<void>;
}

/** Starts the plane when this process has mutual TLS; undefined otherwise. */
export async function startPlane(opts: PlaneOptions): Promise<RunningPlane | undefined> {
  const material = activeTls();
  if (!material) return undefined;
  const log = opts.ctx.logger.child({ component: 'plane' });
  const open = new Set<tls.TLSSocket>();
  const server = tls.createServer(
    { ca: material.caPem, cert: material.certPem, key: material.keyPem, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3', handshakeTimeout: REQUEST_TIMEOUT_MS },
    (socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
      socket.on('error', () => {}); // a peer that goes away; the transfer sees the close
      serve(socket, activeTls() ?? material, opts, open.size, log).catch((err: unknown) => log.error({ err }, 'plane connection failed'));
    },
  );
  server.on('tlsClientError', () => {}); // refused handshakes (no or foreign certificate) never reach a handler
  const stopReloads = onTlsReloaded((m) => server.setSecureContext({ ca: m.caPem, cert: m.certPem, key: m.keyPem }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.hostaddr, () => (server.off('error', reject), resolve()));
  });
  const bound = (server.address() as AddressInfo).port;
  const address = `${opts.hostaddr.includes(':') ? `[${opts.hostaddr}]` : opts.hostaddr}:${bound}`;
  log.info({ address }, 'data plane listening');
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        stopReloads();
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function serve(socket: tls.TLSSocket, material: TlsMaterial, opts: PlaneOptions, openCount: number, log: AgentContext['logger']): Promise<void> {
  const finish = (trailer: PlaneTrailer) => {
    if (!socket.destroyed) socket.end(endFrame(trailer));
  };
  let request: PlaneRequest;
  try {
    request = await readRequest(socket);
    const refusal = refusalOf(socket, request, material, opts.self());
    if (refusal) {
      log.warn({ peer: socket.remoteAddress, op: request.op, refusal }, 'data plane request refused');
      return finish({ code: grpc.status.PERMISSION_DENIED, details: refusal });
    }
    if (openCount > MAX_TRANSFERS) return finish({ code: grpc.status.RESOURCE_EXHAUSTED, details: `more than ${MAX_TRANSFERS} transfers at once` });
  } catch (err) {
    return finish({ code: grpc.status.INVALID_ARGUMENT, details: err instanceof Error ? err.message : String(err) });
  }
  const handler = planeHandlers.get(request.op);
  if (!handler) return finish({ code: grpc.status.UNIMPLEMENTED, details: `unknown data plane op ${JSON.stringify(request.op)}` });
  const abort = new AbortController();
  socket.once('close', () => abort.abort());
  // The caller sends nothing after its request line: more bytes break the protocol. Reading
  // on also notices a caller that goes away (its end closes the socket, which stops the transfer).
  socket.on('data', () => socket.destroy());
  socket.resume();
  let sent = 0;
  const sink: PlaneSink = {
    signal: abort.signal,
    async send(data: Buffer | readonly Buffer[]) {
      const pieces = Buffer.isBuffer(data) ? [data] : data;
      let length = 0;
      for (const piece of pieces) length += piece.length;
      if (length === 0) return;
      sent += length;
      if (abort.signal.aborted) throw new Error('the receiver closed the connection');
      socket.cork();
      socket.write(dataFrameHeader(length));
      let flowing = true;
      for (const piece of pieces) if (piece.length > 0) flowing = socket.write(piece);
      socket.uncork();
      if (!flowing) await drainOrClose(socket);
    },
  };
  try {
    const backup = await handler(opts.ctx, request, sink);
    finish({ code: grpc.status.OK, details: '', ...(backup ? { backup } : {}) });
    opts.onTransfer?.(request.op, 'ok', sent);
  } catch (err) {
    opts.onTransfer?.(request.op, 'failed', sent);
    if (!abort.signal.aborted) log.error({ err, op: request.op }, 'data plane transfer failed');
    const code = err instanceof PlaneRefusal ? err.code : agentStatusOf(err);
    finish({ code, details: err instanceof Error ? err.message : String(err) });
  }
}

/** Why the connection's certificate and ticket do not allow `request`, or undefined when they do. */
function refusalOf(socket: tls.TLSSocket, request: PlaneRequest, material: TlsMaterial, self: string): string | undefined {
  const cert = socket.getPeerX509Certificate();
  if (!cert) return 'a client certificate signed by the cluster CA is required';
  const role = roleOf(cert);
  if (role === 'manager') return undefined;
  if (role !== 'agent') return `only a manager, or an agent with a transfer ticket, may use the data plane (the caller's role is ${role ?? 'none'})`;
  const ticket = request.ticket && typeof request.ticket.ticket === 'string' && typeof request.ticket.signer === 'string'
    ? { ticket: request.ticket.ticket, signer: Buffer.from(request.ticket.signer, 'base64') }
    : undefined;
  return ticketRefusal(ticket, cert as X509Certificate, self, material.cas);
}

/** The request line: JSON up to '\n', within MAX_PLANE_REQUEST_BYTES and REQUEST_TIMEOUT_MS, nothing after it. */
function readRequest(socket: tls.TLSSocket): Promise<PlaneRequest> {
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const done = (err: Error | undefined, value?: PlaneRequest) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.pause();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(() => done(new Error(`no request line in ${REQUEST_TIMEOUT_MS} ms`)), REQUEST_TIMEOUT_MS);
    const onEnd = () => done(new Error('the connection ended before its request line'));
    const onData = (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const nl = got.indexOf(0x0a);
      if (nl < 0) {
        if (got.length > MAX_PLANE_REQUEST_BYTES) done(new Error(`the request line exceeds ${MAX_PLANE_REQUEST_BYTES} bytes`));
        return;
      }
      if (nl !== got.length - 1) return done(new Error('bytes follow the request line'));
      try {
        const parsed = JSON.parse(got.subarray(0, nl).toString('utf8')) as PlaneRequest | null;
        if (!parsed || typeof parsed !== 'object' || parsed.v !== 1 || typeof parsed.op !== 'string') throw new Error('the request line must be a JSON object with v 1 and an op');
        done(undefined, parsed);
      } catch (err) {
        done(err instanceof SyntaxError ? new Error('the request line is not JSON') : (err as Error));
      }
    };
    socket.on('data', onData);
    socket.once('end', onEnd);
  });
}

function drainOrClose(socket: tls.TLSSocket): Promise<void> {
  return new Promise((resolve) => {
    const settle = () => {
      socket.off('drain', settle);
      socket.off('close', settle);
      resolve();
    };
    socket.once('drain', settle);
    socket.once('close', settle);
  });
}

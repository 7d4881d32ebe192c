// The caller's side of an agent's bulk data plane (frames.ts): one mutual TLS connection per
// transfer to the agent's plane port, with this process's certificate (the same material as
// its gRPC links) and, for an agent, the transfer ticket of the call it is serving. gRPC
// stays for control; a backup or an object read back crosses this socket instead, because
// grpc-js spends several times the CPU of a TLS socket per byte (bench/backup/README.md).

import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { activeTls } from '../credentials';
import { AgentCallError, AgentUnreachableError } from '../errors';
import type { TlsMaterial } from '../tls/material';
import { servedTicket, type Ticket } from '../tls/ticket';
import { FrameReader, planeAddressOf, type PlaneRequest, type PlaneTrailer } from './frames';

const CONNECT_TIMEOUT_MS = 15_000;

/** What tests vary; a transfer of an agent or a manager passes none. */
export interface PlaneCallOptions {
  /** The ticket to present instead of the served call's (undefined: none). */
  ticket?: Ticket;
  /** Client certificate material instead of this process's. */
  material?: TlsMaterial;
  /** The plane's address instead of the agent's gRPC port + 1 (an agent on an ephemeral port). */
  at?: { host: string; port: number };
  /** Called with the agent's end frame when it said OK, before the iteration ends (a compressed backup's facts). */
  onTrailer?: (trailer: PlaneTrailer) => void;
}

type RequestBody = PlaneRequest extends infer R ? (R extends PlaneRequest ? Omit<R, 'v' | 'ticket'> : never) : never;

/** Whether transfers go over the data plane: only with mutual TLS (an `--insecure` process has no plane). */
export function planeEnabled(): boolean {
  return activeTls() !== undefined;
}

/** A connected plane socket that has sent its request line. */
async function connectPlane(agentAddress: string, request: RequestBody, options: PlaneCallOptions): Promise<{ socket: tls.TLSSocket; where: string }> {
  const material = options.material ?? activeTls();
  if (!material) throw new Error('the data plane needs mutual TLS; this process has plaintext links');
  const { host, port } = options.at ?? planeAddressOf(agentAddress);
  const where = `${agentAddress} (data plane ${host}:${port})`;
  const ticket = 'ticket' in options ? options.ticket : servedTicket.getStore();
  const line: PlaneRequest = { v: 1, ...request, ...(ticket ? { ticket: { ticket: ticket.ticket, signer: ticket.signer.toString('base64') } } : {}) } as PlaneRequest;
  const socket = tls.connect({ host, port, ca: material.caPem, cert: material.certPem, key: material.keyPem, minVersion: 'TLSv1.3' });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no TLS connection in ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
      socket.once('secureConnect', () => (clearTimeout(timer), resolve()));
      socket.once('error', (err) => (clearTimeout(timer), reject(err)));
    });
  } catch (err) {
    socket.destroy();
    throw new AgentUnreachableError(where, err);
  }
  socket.setKeepAlive(true, 30_000);
  socket.write(`${JSON.stringify(line)}\n`);
  return { socket, where };
}

/** The outcome the agent's end frame reported, as the caller sees it (throws unless OK). */
function settle(reader: FrameReader, where: string, options: PlaneCallOptions): void {
  const trailer = reader.trailer;
  if (!trailer) throw new AgentUnreachableError(where, new Error('the connection closed before the end of the transfer'));
  if (trailer.code !== grpc.status.OK) throw new AgentCallError(where, trailer.code, `${trailer.code} ${grpc.status[trailer.code] ?? 'UNKNOWN'}: ${trailer.details}`);
  options.onTrailer?.(trailer);
}

/**
 * The bytes the agent at `agentAddress` (its gRPC `host:port`) sends for `request`. The
 * iteration ends normally only once the agent's end frame said OK; a failure it reported is
 * an AgentCallError with its status, a connection that broke is AgentUnreachableError.
 * Stopping the iteration early closes the connection, which stops the agent's side.
 */
export async function* planeStream(agentAddress: string, request: RequestBody, options: PlaneCallOptions = {}): AsyncGenerator<Buffer> {
  const { socket, where } = await connectPlane(agentAddress, request, options);
  try {
    const reader = new FrameReader();
    try {
      for await (const chunk of socket as AsyncIterable<Buffer>) {
        for (const data of reader.push(chunk)) yield data;
      }
    } catch (err) {
      throw new AgentUnreachableError(where, err);
    }
    settle(reader, where, options);
  } finally {
    socket.destroy();
  }
}

/** A transfer received through a callback (planeReceive). */
export interface PlaneReception {
  /** Resolves once the agent's end frame said OK and every piece was handed over; rejects like planeStream. */
  done: Promise<void>;
  /** Closes the connection, which stops the agent's side; `done` then rejects. */
  stop(): void;
}

/**
 * planeStream's transfer, handed to `onData` from the socket's 'data' events: no async
 * iteration per received chunk, which is a measurable part of a receiver's CPU per GB
 * (bench/backup/README.md). The pieces are views of the received chunks, in order. When
 * `onData` returns a promise, no piece is handed over and reading pauses until it resolves;
 * a rejection ends the transfer with that error.
 */
export function planeReceive(agentAddress: string, request: RequestBody, onData: (data: Buffer) => void | Promise<void>, options: PlaneCallOptions = {}): PlaneReception {
  let socket: tls.TLSSocket | undefined;
  let stopped = false;
  const done = (async () => {
    const connected = await connectPlane(agentAddress, request, options);
    socket = connected.socket;
    const where = connected.where;
    if (stopped) socket.destroy();
    const reader = new FrameReader();
    let waiting: Promise<void> | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        let failed = false;
        const fail = (err: unknown) => {
          if (failed) return;
          failed = true;
          socket!.destroy();
          reject(err);
        };
        // Pieces received while the caller holds the stream back wait here, in order.
        const queued: Buffer[] = [];
        let closed = false;
        // Over once the connection closed and the caller took (and finished with) every piece.
        const finishIfDone = () => {
          if (closed && !waiting && queued.length === 0 && !failed) resolve();
        };
        const deliver = () => {
          while (!waiting && !failed && queued.length > 0) {
            let pending: void | Promise<void>;
            try {
              pending = onData(queued.shift()!);
            } catch (err) {
              return fail(err);
            }
            if (!pending) continue;
            const held = pending;
            waiting = held;
            socket!.pause();
            held.then(() => {
              waiting = undefined;
              deliver();
              if (!waiting && !failed) socket!.resume();
            }, fail);
          }
          finishIfDone();
        };
        socket!.on('data', (chunk: Buffer) => {
          try {
            queued.push(...reader.push(chunk));
          } catch (err) {
            return fail(new AgentUnreachableError(where, err));
          }
          deliver();
        });
        socket!.once('error', (err) => fail(new AgentUnreachableError(where, err)));
        socket!.once('close', () => {
          if (stopped && !reader.trailer) return fail(new AgentUnreachableError(where, new Error('the transfer was stopped')));
          closed = true;
          finishIfDone();
        });
      });
      settle(reader, where, options);
    } finally {
      socket.destroy();
    }
  })();
  done.catch(() => {}); // the caller awaits it; a stop before that must not be an unhandled rejection
  return {
    done,
    stop: () => {
      stopped = true;
      socket?.destroy();
    },
  };
}

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

/**
 * The bytes the agent at `agentAddress` (its gRPC `host:port`) sends for `request`. The
 * iteration ends normally only once the agent's end frame said OK; a failure it reported is
 * an AgentCallError with its status, a connection that broke is AgentUnreachableError.
 * Stopping the iteration early closes the connection, which stops the agent's side.
 */
export async function* planeStream(agentAddress: string, request: RequestBody, options: PlaneCallOptions = {}): AsyncGenerator<Buffer> {
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
    }).catch((err: unknown) => {
      throw new AgentUnreachableError(where, err);
    });
    socket.setKeepAlive(true, 30_000);
    socket.write(`${JSON.stringify(line)}\n`);
    const reader = new FrameReader();
    try {
      for await (const chunk of socket as AsyncIterable<Buffer>) {
        for (const data of reader.push(chunk)) yield data;
      }
    } catch (err) {
      throw new AgentUnreachableError(where, err);
    }
    const trailer = reader.trailer;
    if (!trailer) throw new AgentUnreachableError(where, new Error('the connection closed before the end of the transfer'));
    if (trailer.code !== grpc.status.OK) throw new AgentCallError(where, trailer.code, `${trailer.code} ${grpc.status[trailer.code] ?? 'UNKNOWN'}: ${trailer.details}`);
    options.onTrailer?.(trailer);
  } finally {
    socket.destroy();
  }
}

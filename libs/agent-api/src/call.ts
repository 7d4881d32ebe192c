// The one unary call helper of every agent client: a deadline on each call, and a failure
// thrown as AgentUnreachableError or AgentCallError (errors.ts), never a bare ServiceError.

import * as grpc from '@grpc/grpc-js';
import { agentChannelOptions } from './channel-options';
import { activeTls, channelCredentials } from './credentials';
import { agentCallFailure } from './errors';
import { relayTicket, ticketMetadataFor } from './tls/ticket';
import { leaseChannel } from './shared-channels';
import { protocolClientInterceptor, type ProtocolIdentity } from './protocol-version';

/** An agent's client speaks for a manager, or for an agent pulling from another agent (its TLS role says which). */
const callerIdentity: ProtocolIdentity = {
  self: () => ({ kind: activeTls()?.role === 'agent' ? 'agent' : 'manager', name: '' }),
  peerKind: 'agent',
};

/** A gRPC client of one agent service at `address`, with kcm's credentials and channel options. */
export function agentClient(service: grpc.ServiceClientConstructor, address: string): grpc.Client {
  // An agent relays the transfer ticket of the call it serves (tls/ticket.ts). Every call
  // states this build's kcm protocol and checks the agent's (protocol-version.ts).
  // One channel per agent shared by every client of it (shared-channels.ts). KCM_BENCH_CHANNEL_PER_CLIENT=1
  // restores a channel per client, only so bench:scale can measure what sharing saves.
  const sharing = process.env.KCM_BENCH_CHANNEL_PER_CLIENT === '1' ? {} : { channelFactoryOverride: leaseChannel };
  return new service(address, channelCredentials(), { ...agentChannelOptions, interceptors: [protocolClientInterceptor(address, callerIdentity), relayTicket], ...sharing });
}

export function callUnary<Res>(client: grpc.Client, address: string, method: string, request: object, deadlineMs: number): Promise<Res> {
  const fn = (client as unknown as Record<string, Function>)[method].bind(client);
  return new Promise<Res>((resolve, reject) => {
    // A manager's request naming other agents carries a ticket for exactly those transfers.
    const metadata = ticketMetadataFor(address, request, deadlineMs) ?? new grpc.Metadata();
    fn(request, metadata, { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, reply: Res) => {
      if (!err) return resolve(reply);
      reject(agentCallFailure(address, err));
    });
  });
}

/**
 * A server stream the caller listens to for as long as it wants (Agent.Watch,
 * MariaDbHaAgent.WatchStatus): `onMessage` for each message. Resolves when `signal` ended it;
 * rejects with the call's failure otherwise (AgentUnreachableError for a broken link,
 * AgentCallError UNIMPLEMENTED from an agent older than the method). No deadline.
 */
export function listenToStream<Res>(client: grpc.Client, address: string, method: string, request: object, onMessage: (message: Res) => void, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return resolve();
    const open = (client as unknown as Record<string, (req: object, md: grpc.Metadata) => grpc.ClientReadableStream<Res>>)[method].bind(client);
    const call = open(request, new grpc.Metadata());
    const cancel = () => call.cancel();
    signal.addEventListener('abort', cancel, { once: true });
    call.on('data', onMessage);
    const settle = (err?: grpc.ServiceError) => {
      signal.removeEventListener('abort', cancel);
      if (signal.aborted || !err) resolve();
      else reject(agentCallFailure(address, err));
    };
    call.on('error', settle);
    // A stream the agent ended without an error (it does not, but a proxy might) is over too.
    call.on('end', () => settle());
  });
}

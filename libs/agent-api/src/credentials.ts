// The one place kcm's gRPC links get their credentials: the manager's clients of the agents,
// an agent pulling a backup from another agent, the agents' servers, and the managers'
// Raft and forwarding link. A process configures it once, before it binds anything
// (useTls with material loaded by tls/material.ts, or useInsecure after an explicit
// `--insecure`); until then links are plaintext, which only unit tests rely on: the
// managers' and agents' entry points refuse to start without one or the other.

import * as grpc from '@grpc/grpc-js';
import type { TlsMaterial } from './tls/material';

interface Active {
  material: TlsMaterial;
  channel: grpc.ChannelCredentials;
}

let active: Active | undefined;

/** Every link of this process uses mutual TLS with this material from now on. */
export function useTls(material: TlsMaterial): void {
  // One ChannelCredentials object, so grpc-js can share connections between clients.
  active = { material, channel: grpc.credentials.createSsl(material.caPem, material.keyPem, material.certPem) };
}

/** Plaintext links (`--insecure`, or a unit test's bare transport). */
export function useInsecure(): void {
  active = undefined;
}

/** The TLS material in use, or undefined when links are plaintext. */
export function activeTls(): TlsMaterial | undefined {
  return active?.material;
}

/**
 * Clients verify the server's certificate against the CA and the address they dialled
 * (Node's hostname check: certificates carry the hosts' IP addresses and DNS names as SANs).
 */
export function channelCredentials(): grpc.ChannelCredentials {
  return active?.channel ?? insecureChannel;
}

// One object, as for TLS, so clients of one agent share a channel (shared-channels.ts).
const insecureChannel = grpc.credentials.createInsecure();

/** Servers require a client certificate signed by the CA; roles are checked per call (tls/guard.ts). */
export function serverCredentials(): grpc.ServerCredentials {
  if (!active) return grpc.ServerCredentials.createInsecure();
  const { caPem, keyPem, certPem } = active.material;
  return grpc.ServerCredentials.createSsl(caPem, [{ private_key: keyPem, cert_chain: certPem }], true);
}

// The one place kcm's gRPC links get their credentials: the manager's clients of the agents,
// an agent pulling a backup from another agent, the agents' servers, and the managers'
// Raft and forwarding link. A process configures it once, before it binds anything
// (useTls with material loaded by tls/material.ts, or useInsecure after an explicit
// `--insecure`); until then links are plaintext, which only unit tests rely on: the
// managers' and agents' entry points refuse to start without one or the other.
// The files are looked at again every few seconds and a renewed certificate is used for new
// connections without a restart (tls/reloading.ts).

import * as grpc from '@grpc/grpc-js';
import type { TlsMaterial } from './tls/material';
import { ReloadingTlsMaterial, type ReloadOptions } from './tls/reloading';

interface Active {
  material: ReloadingTlsMaterial;
  channel: grpc.ChannelCredentials;
  server: grpc.ServerCredentials;
}

let active: Active | undefined;
const reloadListeners = new Set<(material: TlsMaterial) => void>();

/** Every link of this process uses mutual TLS with this material (and its files' renewals) from now on. */
export function useTls(material: TlsMaterial, reload: Pick<ReloadOptions, 'checkMs' | 'warn'> = {}): void {
  active?.material.stop();
  const provider = new ReloadingTlsMaterial(material, { ...reload, reloaded: (m) => reloadListeners.forEach((l) => l(m)) });
  provider.start();
  active = {
    material: provider,
    // One ChannelCredentials object, so grpc-js can share connections between clients.
    channel: grpc.experimental.createCertificateProviderChannelCredentials(provider, provider),
    // One provider serves as both the CA and the identity source; client certificates are required.
    server: grpc.experimental.createCertificateProviderServerCredentials(provider, provider, true),
  };
}

/** Plaintext links (`--insecure`, or a unit test's bare transport). */
export function useInsecure(): void {
  active?.material.stop();
  active = undefined;
}

/** The TLS material in use now (the latest that loaded), or undefined when links are plaintext. */
export function activeTls(): TlsMaterial | undefined {
  return active?.material.current;
}

/** Looks at the TLS files now instead of at the next check (tests, or a SIGHUP); true when a new set is in use. */
export function reloadTlsNow(): boolean {
  return active?.material.checkNow() ?? false;
}

/** Called with each new set of material (listeners that are not gRPC: the agents' data plane). */
export function onTlsReloaded(listener: (material: TlsMaterial) => void): () => void {
  reloadListeners.add(listener);
  return () => reloadListeners.delete(listener);
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
  return active?.server ?? grpc.ServerCredentials.createInsecure();
}

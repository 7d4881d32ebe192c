// One gRPC channel (one HTTP/2 connection, one TLS handshake) per agent address and
// credentials, shared by every client of that agent in this process: the manager keeps a
// client per service kind and host (health, MariaDB, PostgreSQL, host probes, ...), and with
// a channel each, a 1,000-host fleet meant thousands of connections and, after the pool's
// idle close, ~2,000 TLS handshakes for one get_cluster_summary. A client gets a lease on the
// shared channel: closing the client ends its lease, and the channel closes with its last.

import * as grpc from '@grpc/grpc-js';

interface Shared {
  channel: grpc.Channel;
  leases: number;
}

const shared = new Map<string, Shared>();
const credentialIds = new WeakMap<grpc.ChannelCredentials, number>();
let nextCredentialId = 1;

function credentialId(credentials: grpc.ChannelCredentials): number {
  let id = credentialIds.get(credentials);
  if (id === undefined) credentialIds.set(credentials, (id = nextCredentialId++));
  return id;
}

/** The agent address of a `<credentials id> <address>` key. */
const addressOfKey = (key: string): string => key.slice(key.indexOf(' ') + 1);

/** A grpc-js channelFactoryOverride: a lease on the shared channel to `address` with `credentials`. */
export function leaseChannel(address: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions): grpc.Channel {
  const key = `${credentialId(credentials)} ${address}`;
  let entry = shared.get(key);
  if (!entry) {
    entry = { channel: new grpc.Channel(address, credentials, options), leases: 0 };
    shared.set(key, entry);
  }
  const leased = entry;
  leased.leases++;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    if (--leased.leases > 0) return;
    if (shared.get(key) === leased) shared.delete(key);
    leased.channel.close();
  };
  return new Proxy(leased.channel, {
    get(target, prop) {
      if (prop === 'close') return release;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The next client of `address` gets a new channel (its agent was found unreachable: a fresh
 * channel tries to connect at once, instead of waiting out grpc's reconnect backoff); the
 * old channel closes when its last lease ends.
 */
export function renewChannel(address: string): void {
  for (const key of [...shared.keys()]) if (addressOfKey(key) === address) shared.delete(key);
}

/** Open shared channels (tests, metrics). */
export function sharedChannelCount(): number {
  return shared.size;
}

/**
 * A shared channel to `address` is still connecting (its TCP connect or TLS handshake is
 * under way). A call that timed out on such a channel says the handshake is slow, not that
 * the agent is gone: renewing the channel would start the handshake over, and under a
 * leader's first rounds over 1,000 hosts (each handshake a few ms of CPU, deadlines of 1 s)
 * every round then timed out on fresh handshakes again (bench:scale:failure).
 */
export function channelConnecting(address: string): boolean {
  for (const [key, entry] of shared) {
    if (addressOfKey(key) === address && entry.channel.getConnectivityState(false) === grpc.connectivityState.CONNECTING) return true;
  }
  return false;
}


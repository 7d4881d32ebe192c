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

/** Its last connect failed: grpc waits out its reconnect backoff, and fails every call at once meanwhile. */
function backingOff(entry: Shared): boolean {
  return entry.channel.getConnectivityState(false) === grpc.connectivityState.TRANSIENT_FAILURE;
}

/** The shared channel for `key`, or a new one when there is none or it is backing off. */
function usableChannel(key: string, address: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions): Shared {
  let entry = shared.get(key);
  if (!entry || backingOff(entry)) {
    entry = { channel: new grpc.Channel(address, credentials, options), leases: 0 };
    shared.set(key, entry);
  }
  return entry;
}

function endLease(key: string, entry: Shared): void {
  if (--entry.leases > 0) return;
  if (shared.get(key) === entry) shared.delete(key);
  entry.channel.close();
}

/**
 * A grpc-js channelFactoryOverride: a lease on the shared channel to `address` with `credentials`.
 *
 * A lease never starts a call on a channel that is backing off after a failed connect: it
 * moves to a fresh shared channel, which connects at once. grpc's backoff runs from 1 s to
 * minutes, and every call on such a channel fails at once meanwhile, so after an agent
 * restart the first call through each client kept alive meanwhile (a job's MariaDB or
 * PostgreSQL client of that host) failed as unreachable although the agent answered
 * (rollback-agent-kill.test.ts's delete_cluster). The old channel closes with its last lease.
 */
export function leaseChannel(address: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions): grpc.Channel {
  const key = `${credentialId(credentials)} ${address}`;
  let entry = usableChannel(key, address, credentials, options);
  entry.leases++;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    endLease(key, entry);
  };
  const moveOffIfBackingOff = () => {
    if (released || !backingOff(entry)) return;
    const fresh = usableChannel(key, address, credentials, options);
    fresh.leases++;
    endLease(key, entry);
    entry = fresh;
  };
  return new Proxy(entry.channel, {
    get(_target, prop) {
      if (prop === 'close') return release;
      if (prop === 'createCall') moveOffIfBackingOff();
      const channel = entry.channel;
      const value = Reflect.get(channel, prop, channel) as unknown;
      return typeof value === 'function' ? value.bind(channel) : value;
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


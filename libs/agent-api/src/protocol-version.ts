// The kcm protocol exchange on gRPC (the rule and the words are @kcm/common's kcm-protocol.ts):
// every call a kcm client makes states `kcm-protocol` (and `kcm-version`) in its metadata,
// every reply of a kcm server states them in its headers (and in its trailers, so a reply
// that is only a status states them too). Each side refuses a peer whose protocol it does
// not talk to with FAILED_PRECONDITION and words naming both versions and what to do, and
// logs that once per peer, not once per call.
//
// What a client learns of each server's protocol is kept per address (peerProtocols), so the
// leader knows every agent's version from its ordinary traffic (get_meta_mode shows them).

import * as grpc from '@grpc/grpc-js';
import {
  KCM_PROTOCOL,
  KCM_VERSION,
  PROTOCOL_METADATA_KEY,
  VERSION_METADATA_KEY,
  protocolRefusal,
  readPeerProtocol,
  type PeerProtocol,
  type ProtocolParty,
} from '@kcm/common';

/** How a refusal is logged; structurally a pino logger's warn. */
export type ProtocolWarn = (fields: object, msg: string) => void;

/** A JSON line on stderr, the shape of the processes' pino lines, when no logger was given. */
const stderrWarn: ProtocolWarn = (fields, msg) => {
  process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), component: 'kcm-protocol', ...fields, msg })}\n`);
};

/** Keys (`<side> <peer> <stated>`) already logged: a refused peer is logged once, not per call. */
const logged = new Set<string>();
const MAX_LOGGED_KEYS = 10_000;

function warnOnce(warn: ProtocolWarn, key: string, fields: object, msg: string): void {
  if (logged.has(key)) return;
  if (logged.size >= MAX_LOGGED_KEYS) logged.clear(); // a flood of distinct peers only repeats lines
  logged.add(key);
  warn(fields, msg);
}

/** What one peer last stated to this process. */
export interface SeenProtocol {
  /** The protocol it speaks (1 when it stated none); undefined when unreadable. */
  protocol: number | undefined;
  /** Its kcm release as it stated it; '' for a build from before the exchange. */
  kcmVersion: string;
  /** We talk to it. */
  accepted: boolean;
  seenAtMs: number;
}

const seenByAddress = new Map<string, SeenProtocol>();

/** The protocol each server this process called last stated, by the address it was called at. */
export function peerProtocols(): ReadonlyMap<string, SeenProtocol> {
  return seenByAddress;
}

function firstValue(md: grpc.Metadata, key: string): string | undefined {
  const values = md.get(key);
  return values.length > 0 ? String(values[0]) : undefined;
}

/** The protocol a peer states in `md` (none stated: protocol 1). */
export function protocolOfMetadata(md: grpc.Metadata): PeerProtocol {
  return readPeerProtocol(firstValue(md, PROTOCOL_METADATA_KEY));
}

function stateOurs(md: grpc.Metadata): void {
  md.set(PROTOCOL_METADATA_KEY, String(KCM_PROTOCOL));
  md.set(VERSION_METADATA_KEY, KCM_VERSION);
}

/** Who this process is in a refusal's words: its TLS role when it has one. */
export interface ProtocolIdentity {
  /** This side (e.g. `{ kind: 'agent', name: '127.0.2.1:58100' }`). */
  self(): ProtocolParty;
  /** What kind of peer calls (a server) or is called (a client). */
  peerKind: ProtocolParty['kind'];
  warn?: ProtocolWarn;
}

/** The caller's host as gRPC names it (`ipv4:127.0.1.2:41234` -> `127.0.1.2`). */
function callerHost(peer: string): string {
  const bare = peer.replace(/^ipv[46]:/, '');
  const bracketed = /^\[([^\]]+)\]:\d+$/.exec(bare);
  if (bracketed) return bracketed[1];
  const colon = bare.lastIndexOf(':');
  return colon > 0 && bare.indexOf(':') === colon ? bare.slice(0, colon) : bare;
}

/**
 * A server interceptor: refuses a call from a peer whose protocol this build does not talk
 * to (FAILED_PRECONDITION) and states this build's protocol in every reply. Put it first in
 * the server's interceptors, so the replies and refusals of the ones after it state it too.
 */
export function protocolServerGuard(identity: ProtocolIdentity): grpc.ServerInterceptor {
  const warn = identity.warn ?? stderrWarn;
  return (method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(md, pass) {
            const stated = protocolOfMetadata(md);
            if (stated.ok) return pass(md);
            const host = callerHost(call.getPeer());
            const details = protocolRefusal({ kind: identity.peerKind, name: host }, identity.self(), stated);
            warnOnce(warn, `server ${host} ${stated.stated}`, { peer: host, rpc: method.path, peer_protocol: stated.stated, protocol: KCM_PROTOCOL }, `refused a kcm protocol this build does not talk to: ${details}`);
            const trailers = new grpc.Metadata();
            stateOurs(trailers);
            call.sendStatus({ code: grpc.status.FAILED_PRECONDITION, details, metadata: trailers });
          },
        });
      },
      sendMetadata(md, next) {
        stateOurs(md);
        next(md);
      },
      sendStatus(status, next) {
        const metadata = status.metadata ?? new grpc.Metadata();
        stateOurs(metadata);
        next({ ...status, metadata });
      },
    });
}

/**
 * A client interceptor for calls to the server at `address`: states this build's protocol,
 * records the one the server states (peerProtocols), and fails the call with
 * FAILED_PRECONDITION when the server speaks one this build does not talk to.
 */
export function protocolClientInterceptor(address: string, identity: ProtocolIdentity): grpc.Interceptor {
  const warn = identity.warn ?? stderrWarn;
  return (options, nextCall) => {
    let refusal: string | undefined;
    let recorded = false;
    const record = (md: grpc.Metadata): PeerProtocol => {
      recorded = true;
      const stated = protocolOfMetadata(md);
      const kcmVersion = firstValue(md, VERSION_METADATA_KEY) ?? '';
      const known = seenByAddress.get(address);
      // The same answer as last time (nearly every call): no new object per reply.
      if (known && known.protocol === stated.protocol && known.kcmVersion === kcmVersion) known.seenAtMs = Date.now();
      else seenByAddress.set(address, { protocol: stated.protocol, kcmVersion, accepted: stated.ok, seenAtMs: Date.now() });
      if (!stated.ok) {
        refusal = protocolRefusal({ kind: identity.peerKind, name: address }, identity.self(), stated);
        warnOnce(warn, `client ${address} ${stated.stated}`, { peer: address, rpc: options.method_definition.path, peer_protocol: stated.stated, protocol: KCM_PROTOCOL }, `refused a kcm protocol this build does not talk to: ${refusal}`);
      }
      return stated;
    };
    const intercepting: grpc.InterceptingCall = new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        stateOurs(metadata);
        next(metadata, {
          onReceiveMetadata(md, pass) {
            // Refused: cancel, then let the headers on (grpc-js holds the status back until
            // every listener has passed what it received), so the caller gets the refusal.
            if (!record(md).ok) intercepting.cancelWithStatus(grpc.status.FAILED_PRECONDITION, refusal ?? '');
            pass(md);
          },
          onReceiveStatus(status, pass) {
            // A reply that is only a status (a refusal, an early error) states it in its trailers.
            if (!recorded && status.metadata.get(PROTOCOL_METADATA_KEY).length > 0) record(status.metadata);
            if (refusal !== undefined && status.code !== grpc.status.FAILED_PRECONDITION) {
              return pass({ ...status, code: grpc.status.FAILED_PRECONDITION, details: refusal });
            }
            pass(status);
          },
        });
      },
    });
    return intercepting;
  };
}

/** Forgets what was logged and seen (tests). */
export function resetProtocolMemory(): void {
  logged.clear();
  seenByAddress.clear();
}

// The kcm protocol version: what managers and agents state to each other on every gRPC call
// (metadata `kcm-protocol`, in requests and in replies), so that a rolling upgrade can mix
// two builds and a peer too old or too new is refused with a reason instead of failing in
// some obscure way later (docs/upgrade.md).
//
// The skew rule: a build talks to its own protocol and to the one before it, nothing else.
// A peer that states no version is a build from before the exchange existed: protocol 1.

/** This build's protocol. Bump it when a peer of the previous build would misread something this one sends. */
export const KCM_PROTOCOL = 2;

/** The oldest protocol this build still talks to (one version of skew, both ways). */
export const KCM_PROTOCOL_OLDEST = KCM_PROTOCOL - 1;

/** This build's release, shown beside its protocol (get_meta_mode, agents' Health). */
export const KCM_VERSION = '0.2.0';

/** The gRPC metadata keys of the exchange (lower case: gRPC metadata keys are). */
export const PROTOCOL_METADATA_KEY = 'kcm-protocol';
export const VERSION_METADATA_KEY = 'kcm-version';

/** What a peer stated: a protocol we talk to, or why not. */
export type PeerProtocol =
  | { ok: true; protocol: number }
  | { ok: false; protocol: number | undefined; stated: string; why: 'older' | 'newer' | 'unreadable' };

/**
 * Reads the protocol a peer stated. `undefined` (no metadata at all) is protocol 1: the
 * builds before the exchange send none. Anything but a whole decimal number is unreadable.
 */
export function readPeerProtocol(stated: string | undefined): PeerProtocol {
  if (stated === undefined) return acceptance(1, '');
  const text = stated.trim();
  if (!/^[0-9]{1,6}$/.test(text)) return { ok: false, protocol: undefined, stated, why: 'unreadable' };
  return acceptance(Number(text), stated);
}

function acceptance(protocol: number, stated: string): PeerProtocol {
  if (protocol < KCM_PROTOCOL_OLDEST) return { ok: false, protocol, stated, why: 'older' };
  if (protocol > KCM_PROTOCOL) return { ok: false, protocol, stated, why: 'newer' };
  return { ok: true, protocol };
}

/** Who is speaking, for the messages: e.g. `{ kind: 'manager', name: '127.0.1.2' }` (name '' when unknown). */
export interface ProtocolParty {
  kind: 'manager' | 'agent' | 'peer';
  name: string;
}

/**
 * The refusal's words, naming both sides' versions and what to do, e.g. "manager 127.0.1.2
 * speaks kcm protocol 3; this agent 127.0.2.1:58100 (kcm 0.2.0) accepts kcm protocol 1-2:
 * upgrade this agent first ...".
 */
export function protocolRefusal(peer: ProtocolParty, self: ProtocolParty, refused: Extract<PeerProtocol, { ok: false }>): string {
  const accepts = `this ${self.kind}${self.name ? ` ${self.name}` : ''} (kcm ${KCM_VERSION}) accepts kcm protocol ${KCM_PROTOCOL_OLDEST}-${KCM_PROTOCOL}`;
  if (refused.why === 'unreadable') {
    return `${peer.kind} ${peer.name} states kcm protocol ${JSON.stringify(refused.stated)}, which is not a protocol version; ${accepts}: it is not a kcm build this ${self.kind} can talk to`;
  }
  const speaks = `${peer.kind} ${peer.name} speaks kcm protocol ${refused.protocol}`;
  if (refused.why === 'newer') return `${speaks}; ${accepts}: upgrade this ${self.kind} first (kcm supports one protocol version of skew)`;
  return `${speaks}; ${accepts}: upgrade the ${peer.kind} ${peer.name} first (kcm supports one protocol version of skew)`;
}

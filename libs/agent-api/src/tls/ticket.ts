// Transfer tickets: how an agent may call another agent at all. Agents hold `agent`-role
// certificates, and an agent refuses every call from that role except the few data-plane
// methods an agent legitimately calls on another (a backup stream, a probe of a rebuild
// source, a storage object's Get/Put), and those only with a ticket the manager issued for
// that transfer. A compromised agent host therefore commands no other agent, and reads only
// what a manager sent it to read, only while the manager's call lasts.
//
// The manager mints a ticket when it sends an agent a request naming other agents (fields
// `agent_address`, `storage_agent_address`): it says which host may use it (`holder`, the
// agent the manager calls), which agents it may call (`targets`, exactly the addresses in
// the request) and until when (`exp`, the call's deadline plus a minute). It is signed with
// the manager's TLS private key; the manager's certificate travels with it, and the
// receiving agent checks it against the CA and the manager role, then the caller's own
// certificate against `holder`. The agent relays the tickets of the call it is serving
// (AsyncLocalStorage) on the calls it makes meanwhile; nothing is stored.

import { AsyncLocalStorage } from 'node:async_hooks';
import { X509Certificate, sign, verify } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { activeTls } from '../credentials';
import { certNames, issuedByOneOf, roleOf, type TlsMaterial } from './material';

export const TICKET_KEY = 'kcm-ticket';
export const TICKET_SIGNER_KEY = 'kcm-ticket-signer-bin';

/** The only methods an `agent`-role caller may reach, each with a ticket naming the callee. */
export const DATA_PLANE_METHODS: ReadonlySet<string> = new Set([
  '/kcm.agent.MariaDbAgent/StreamBackup',
  '/kcm.agent.MariaDbAgent/Probe',
  '/kcm.agent.BackupStorageAgent/Get',
  '/kcm.agent.BackupStorageAgent/Put',
]);

const ADDRESS_FIELDS = new Set(['agent_address', 'storage_agent_address']);
const GRACE_MS = 60_000;

export interface TicketPayload {
  v: 1;
  holder: string;
  targets: string[];
  exp: number;
}

export interface Ticket {
  ticket: string;
  signer: Buffer;
}

/** The agent addresses a request names, at any depth. */
export function agentAddressesIn(value: unknown, found = new Set<string>()): Set<string> {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return found;
  if (Array.isArray(value)) {
    for (const item of value) agentAddressesIn(item, found);
    return found;
  }
  for (const [key, item] of Object.entries(value)) {
    if (ADDRESS_FIELDS.has(key) && typeof item === 'string') found.add(item);
    else agentAddressesIn(item, found);
  }
  return found;
}

/** `host` of `host:port` or `[v6]:port`. */
export function hostOf(address: string): string {
  const host = address.slice(0, address.lastIndexOf(':'));
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

/** `[::1]:58100` and `::1:58100` are one address. */
function sameAddress(a: string, b: string): boolean {
  const port = (x: string) => x.slice(x.lastIndexOf(':') + 1);
  return hostOf(a) === hostOf(b) && port(a) === port(b);
}

export function mintTicket(material: TlsMaterial, payload: TicketPayload): Ticket {
  const body = Buffer.from(JSON.stringify(payload));
  const signature = sign('sha256', body, material.key);
  return { ticket: `${body.toString('base64url')}.${signature.toString('base64url')}`, signer: material.cert.raw };
}

/**
 * The ticket metadata of a manager's call to the agent at `address`, when the request names
 * other agents; undefined otherwise, or when this process is not a TLS manager.
 */
export function ticketMetadataFor(address: string, request: unknown, deadlineMs: number, now = Date.now()): grpc.Metadata | undefined {
  const material = activeTls();
  if (!material || material.role !== 'manager') return undefined;
  const targets = [...agentAddressesIn(request)];
  if (targets.length === 0) return undefined;
  const { ticket, signer } = mintTicket(material, { v: 1, holder: hostOf(address), targets, exp: now + deadlineMs + GRACE_MS });
  const md = new grpc.Metadata();
  md.set(TICKET_KEY, ticket);
  md.set(TICKET_SIGNER_KEY, signer);
  return md;
}

export function ticketOf(md: grpc.Metadata): Ticket | undefined {
  const [ticket] = md.get(TICKET_KEY);
  const [signer] = md.get(TICKET_SIGNER_KEY);
  if (typeof ticket !== 'string' || !Buffer.isBuffer(signer)) return undefined;
  return { ticket, signer };
}

/**
 * Why `ticket` does not let `caller` call the agent at `self` (a refusal message), or
 * undefined when it does.
 */
export function ticketRefusal(ticket: Ticket | undefined, caller: X509Certificate, self: string, cas: readonly X509Certificate[], now = Date.now()): string | undefined {
  if (!ticket) return 'an agent may call another agent only with a transfer ticket from a manager';
  let signer: X509Certificate;
  try {
    signer = new X509Certificate(ticket.signer);
  } catch {
    return 'the ticket signer certificate does not parse';
  }
  if (!issuedByOneOf(signer, cas, now) || roleOf(signer) !== 'manager') return 'the ticket is not signed by a manager of this cluster';
  const [body, signature] = ticket.ticket.split('.');
  if (!body || !signature) return 'the ticket is malformed';
  const bodyBytes = Buffer.from(body, 'base64url');
  if (!verify('sha256', bodyBytes, signer.publicKey, Buffer.from(signature, 'base64url'))) return 'the ticket signature is wrong';
  let payload: TicketPayload;
  try {
    payload = JSON.parse(bodyBytes.toString('utf8')) as TicketPayload;
  } catch {
    return 'the ticket is malformed';
  }
  if (payload.v !== 1 || typeof payload.exp !== 'number' || !Array.isArray(payload.targets) || typeof payload.holder !== 'string') return 'the ticket is malformed';
  if (payload.exp < now) return 'the ticket expired';
  if (!certNames(caller, payload.holder)) return `the ticket was issued to ${payload.holder}, not to this caller`;
  if (!payload.targets.some((t) => sameAddress(t, self))) return `the ticket does not name this agent (${self})`;
  return undefined;
}

/** The tickets of the call an agent is serving, relayed on the calls it makes meanwhile. */
export const servedTicket = new AsyncLocalStorage<Ticket>();

/** Client interceptor of every agent client: adds the served call's ticket, if any. */
export const relayTicket: grpc.Interceptor = (options, nextCall) =>
  new grpc.InterceptingCall(nextCall(options), {
    start(metadata, listener, next) {
      const ticket = servedTicket.getStore();
      if (ticket && metadata.get(TICKET_KEY).length === 0) {
        metadata.set(TICKET_KEY, ticket.ticket);
        metadata.set(TICKET_SIGNER_KEY, ticket.signer);
      }
      next(metadata, listener);
    },
  });

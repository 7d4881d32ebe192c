// Bearer-token authentication for Emit. A token is a name, a role and the SHA-256 of the
// token's text: the token itself is never stored (config and replicated state hold only
// the digest). SHA-256 is enough because kcm's tokens are 256 random bits: there is no
// dictionary to try, so a slow password hash (bcrypt, scrypt) would only add latency to
// every request, and a leaked digest does not give the token back (preimage resistance).
// For the same reason looking a digest up in a Map leaks nothing useful through timing:
// it tells an attacker about the digest of what they sent, not about a valid token.
//
// No request is served without a token, loopback included, unless the member runs with
// the explicit `insecure` setting, which serves everyone as an admin and says so loudly.

import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Identity } from '@kcm/protocol';

/** Looks a token up by the hex SHA-256 of its text: the identity it stands for, or undefined. */
export type TokenLookup = (sha256Hex: string) => Identity | undefined;

/** How the gateway authenticates: by token, or not at all (the explicit insecure mode). */
export type EmitAuth = { lookup: TokenLookup } | { insecure: true };

/** The identity every request gets in insecure mode. */
export const INSECURE_IDENTITY: Identity = Object.freeze({ name: 'insecure', role: 'admin' });

export function tokenDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export type AuthOutcome = { identity: Identity } | { refusal: string };

/** The identity an Authorization header proves, or why it proves none. */
export function authenticate(auth: EmitAuth, header: string | undefined): AuthOutcome {
  if ('insecure' in auth) return { identity: INSECURE_IDENTITY };
  if (header === undefined || header === '') return { refusal: 'missing "Authorization: Bearer <token>" header' };
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!match) return { refusal: 'Authorization header must have the form "Bearer <token>"' };
  const identity = auth.lookup(tokenDigest(match[1]));
  return identity ? { identity } : { refusal: 'the bearer token is not valid' };
}

// The identity the onRequest hook proved, for the route's handler (no fastify decoration:
// a WeakMap keeps the request object's shape as fastify built it).
const identities = new WeakMap<FastifyRequest, Identity>();

export function setRequestIdentity(request: FastifyRequest, identity: Identity): void {
  identities.set(request, identity);
}

export function requestIdentity(request: FastifyRequest): Identity | undefined {
  return identities.get(request);
}

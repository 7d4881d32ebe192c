// Bearer-token authentication for Emit. Tokens come from manager configuration; when none
// are configured the gateway runs in loopback dev mode (no auth) and says so once in its log.
// A token is compared through SHA-256 digests with timingSafeEqual, so neither the length nor
// a matching prefix of a valid token leaks through response time.

import { createHash, timingSafeEqual } from 'node:crypto';
import { isLoopbackHost } from '@kcm/common';

export interface AuthConfig {
  /** Accepted bearer tokens; any one of them authenticates a request. */
  tokens: string[];
}

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

export interface BearerCheck {
  /** True when auth is configured; false in loopback dev mode. */
  readonly enabled: boolean;
  /** Why the request is refused, or null when it may proceed. */
  refusal(authorizationHeader: string | undefined): string | null;
}

export function bearerCheck(auth: AuthConfig | undefined): BearerCheck {
  const accepted = (auth?.tokens ?? []).filter((t) => t !== '').map(digest);
  if (accepted.length === 0) return { enabled: false, refusal: () => null };
  return {
    enabled: true,
    refusal(header) {
      if (header === undefined || header === '') return 'missing "Authorization: Bearer <token>" header';
      const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
      if (!match) return 'Authorization header must have the form "Bearer <token>"';
      const offered = digest(match[1]);
      // Check every token (no early exit) so timing does not reveal which one matched.
      let ok = false;
      for (const token of accepted) ok = timingSafeEqual(offered, token) || ok;
      return ok ? null : 'the bearer token is not valid';
    },
  };
}

/**
 * Dev mode is loopback only: refuse to serve Emit without tokens on an address other hosts
 * can reach. The manager's main calls this before it listens.
 */
export function assertAuthForListenHost(host: string, auth: AuthConfig | undefined): void {
  const hasTokens = (auth?.tokens ?? []).some((t) => t !== '');
  if (!hasTokens && !isLoopbackHost(host)) {
    throw new Error(`refusing to listen on ${host} without auth tokens: only loopback addresses may run without authentication`);
  }
}

// create_token without a digest: the member that receives it makes the token here, sends
// only its SHA-256 on (to the leader, into the Raft log), and answers with the token in the
// acknowledgement's attachment. The token itself is stored nowhere.
//
// A client that lost that reply sends the same body again with the same request_id. The
// request_id check (meta/jobs.ts jobOfRequest) compares request digests over the paras, so a
// fresh random token on the retry (another digest in the paras) made it CONFLICT, and the first
// token lived on unknown to anyone (issue 35, item 7). With a request_id and the managers'
// secrets key, the token is therefore derived from the key and the request (requestBoundTokens):
// every member makes the same token for the same submitter, request_id, name and role, the
// retry matches its first submission, and gets the same job and the same token back. Another
// token name (another admin) sending that request_id gets another token, so another digest:
// CONFLICT, never the first submitter's token. Without a request_id, or without a key
// (insecure mode), the token is random and a retry cannot get it back.

import { randomBytes } from 'node:crypto';
import { canonicalJobType } from '@kcm/protocol';
import { tokenDigest } from './auth';

export interface IssuedToken {
  /** The body to submit: its paras carry token_sha256. */
  body: Record<string, unknown>;
  /** The token, for the reply (undefined when the caller sent its own digest). */
  token?: string;
}

/** What a create_token to be answered with a token asked for, as the receiving member saw it. */
export interface TokenRequest {
  /** The envelope's request_id, when it has one. */
  requestId?: string;
  /** The name of the token that sent it (the identity the member authenticated). */
  submitter?: string;
  name: unknown;
  role: unknown;
}

/** Makes the token a create_token answers with: 256 bits nobody can guess, since kcm keeps only its SHA-256 (see auth.ts). */
export type TokenMinter = (request: TokenRequest) => string;

const TOKEN_PREFIX = 'kcm_';

/** A new token: 256 random bits. */
export function newToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export const randomTokens: TokenMinter = () => newToken();

/**
 * Tokens derived from the managers' secrets key (an HMAC: secrets/secret-box.ts derive) and the
 * request when it has a request_id: the same request from the same submitter gets the same
 * token on every member. Random otherwise, and when there is no key.
 */
export function requestBoundTokens(secrets: { derive(purpose: string, message: string): Buffer | undefined }): TokenMinter {
  return (request) => {
    if (request.requestId === undefined || request.submitter === undefined) return newToken();
    const { requestId, submitter, name, role } = request;
    const derived = secrets.derive('create_token', JSON.stringify([requestId, submitter, name ?? null, role ?? null]));
    return derived === undefined ? newToken() : TOKEN_PREFIX + derived.toString('base64url');
  };
}

/** For a create_token body without token_sha256, a body with the digest of a token `mint` makes; otherwise undefined (the body goes as it is). */
export function issueTokenIfAsked(body: unknown, sentJobType: string, submitter: string | undefined, mint: TokenMinter = randomTokens): IssuedToken | undefined {
  if (canonicalJobType(sentJobType) !== 'create_token') return undefined;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const paras = (body as { paras?: unknown }).paras;
  if (typeof paras !== 'object' || paras === null || Array.isArray(paras) || 'token_sha256' in paras) return undefined;
  const requestId = (body as { request_id?: unknown }).request_id;
  const { name, role } = paras as { name?: unknown; role?: unknown };
  const token = mint({ ...(typeof requestId === 'string' ? { requestId } : {}), ...(submitter === undefined ? {} : { submitter }), name, role });
  return { body: { ...body, paras: { ...paras, token_sha256: tokenDigest(token) } }, token };
}

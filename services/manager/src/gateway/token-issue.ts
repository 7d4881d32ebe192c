// create_token without a digest: the member that receives it makes the token here, sends
// only its SHA-256 on (to the leader, into the Raft log), and answers with the token in the
// acknowledgement's attachment. That reply is the only place the token ever appears.

import { randomBytes } from 'node:crypto';
import { canonicalJobType } from '@kcm/protocol';
import { tokenDigest } from './auth';

export interface IssuedToken {
  /** The body to submit: its paras carry token_sha256. */
  body: Record<string, unknown>;
  /** The token, for the reply (undefined when the caller sent its own digest). */
  token?: string;
}

/** A new token: 256 random bits, so its SHA-256 is all kcm needs to keep (see auth.ts). */
export function newToken(): string {
  return `kcm_${randomBytes(32).toString('base64url')}`;
}

/** For a create_token body without token_sha256, a body with the digest of a fresh token; otherwise the body as it is. */
export function issueTokenIfAsked(body: unknown, sentJobType: string): IssuedToken | undefined {
  if (canonicalJobType(sentJobType) !== 'create_token') return undefined;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const paras = (body as { paras?: unknown }).paras;
  if (typeof paras !== 'object' || paras === null || Array.isArray(paras) || 'token_sha256' in paras) return undefined;
  const token = newToken();
  return { body: { ...body, paras: { ...paras, token_sha256: tokenDigest(token) } }, token };
}

/**
 * Tokens and the audit trail (beyond the spec's list, issue 16; admin only, see roles.ts).
 * A token is kept only as its SHA-256: create_token's reply carries the token once.
 */
import { z } from 'zod';
import { enumString, formatted, integerString, type Parsed } from '../formats';
import { ROLES, TOKEN_NAME_PATTERN, TOKEN_NAME_RULE } from '../roles';

export function parseTokenName(s: string): Parsed<string> {
  return TOKEN_NAME_PATTERN.test(s) ? { ok: true, value: s } : { ok: false, rule: TOKEN_NAME_RULE };
}
const tokenNameString = () => formatted(parseTokenName, 'token name [A-Za-z0-9_.-], at most 64');

const SHA256_HEX = /^[0-9a-f]{64}$/;
function parseSha256(s: string): Parsed<string> {
  return SHA256_HEX.test(s) ? { ok: true, value: s } : { ok: false, rule: 'must be a SHA-256 in 64 lowercase hex digits' };
}

export const createTokenParas = z.object({
  name: tokenNameString(),
  role: enumString(ROLES),
  /**
   * The token's SHA-256. Left out, the member that receives the request makes a token,
   * puts its digest here and answers with the token (in that acknowledgement, and again to
   * a retry by the same sender with the same request_id); given, the caller made the token
   * itself and kcm never sees it.
   */
  token_sha256: formatted(parseSha256, '64 lowercase hex digits').optional(),
});

export const deleteTokenParas = z.object({
  name: tokenNameString(),
});

/** Newest records first: the `limit` newest with seq >= `since`. */
export const getAuditParas = z.object({
  since: integerString(1).optional(),
  limit: integerString(1, 10_000).optional(),
});

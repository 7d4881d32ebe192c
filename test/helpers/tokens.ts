// Emit tokens for tests and benchmarks: one fixed token per role, what a manager's config
// says about them (name, role, SHA-256), and the Authorization header to send. The
// fixtures (test/manager/helpers, test/cluster, services/*/test, bench/*) call these in a
// line or two, so every system test talks to managers authenticated, as a client must.

import { createHash } from 'node:crypto';
import type { Identity, Role } from '@kcm/protocol';

/** Fixed, so a test's log or a failed run can be replayed by hand; they guard nothing real. */
export const TEST_TOKENS: Readonly<Record<Role, string>> = Object.freeze({
  admin: 'kcm-test-admin-7f3c9a51d2e84b06a1c5e9f2d7b4c830',
  operator: 'kcm-test-operator-2b8e6d41c9a7f305e1d4b8c62a9f7e15',
  viewer: 'kcm-test-viewer-9d1a7c3e5b2f8046c7e1a9d3b5f2c784',
});

export const TEST_TOKEN_NAMES: Readonly<Record<Role, string>> = Object.freeze({ admin: 'test-admin', operator: 'test-operator', viewer: 'test-viewer' });

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** The manager config's `tokens`: the three test tokens, by digest. */
export function testTokenConfig(): { name: string; role: Role; sha256: string }[] {
  return (['admin', 'operator', 'viewer'] as const).map((role) => ({ name: TEST_TOKEN_NAMES[role], role, sha256: sha256(TEST_TOKENS[role]) }));
}

/** A gateway's token lookup (unit tests build gateways without a config). */
export function testTokenLookup(): (sha256Hex: string) => Identity | undefined {
  const byDigest = new Map(testTokenConfig().map((t) => [t.sha256, { name: t.name, role: t.role }]));
  return (digest) => byDigest.get(digest);
}

let defaultToken: string | undefined;

/**
 * Makes authHeader() without a role (what every fixture sends) carry `token` instead of the
 * test admin's: for a test against a `kcm local up` deployment, whose managers know only the
 * admin token that up made. Per test file (vitest loads modules per file).
 */
export function useDefaultToken(token: string | undefined): void {
  defaultToken = token;
}

/** `{ authorization: 'Bearer <token>' }` for a role's test token (by default the admin's, or useDefaultToken's). */
export function authHeader(role?: Role): { authorization: string } {
  const token = role === undefined ? (defaultToken ?? TEST_TOKENS.admin) : TEST_TOKENS[role];
  return { authorization: `Bearer ${token}` };
}

// The token a create_token answers with: derived from the managers' shared secrets key and the
// request when it has a request_id, so a retry at any member gets the token of its first
// submission (issue 35, item 7); random otherwise.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { tokenDigest } from '../../src/gateway/auth';
import { issueTokenIfAsked, requestBoundTokens } from '../../src/gateway/token-issue';
import { SecretBox } from '../../src/secrets/secret-box';
import { envelope } from './helpers';

const KEY = randomBytes(32);
/** Two members: two boxes from the one key file every member has. */
const memberA = requestBoundTokens(SecretBox.withKey(KEY));
const memberB = requestBoundTokens(SecretBox.withKey(Buffer.from(KEY)));
const request = { requestId: 'r-1', submitter: 'ops-admin', name: 'robot', role: 'viewer' };

describe('requestBoundTokens', () => {
  it('every member makes the same token for the same submitter, request_id, name and role', () => {
    const token = memberA(request);
    expect(token).toMatch(/^kcm_[A-Za-z0-9_-]{43}$/);
    expect(memberB(request)).toBe(token);
  });

  it('another submitter, request_id, name, role or key makes another token', () => {
    const token = memberA(request);
    for (const other of [{ submitter: 'other-admin' }, { requestId: 'r-2' }, { name: 'robot2' }, { role: 'admin' }]) {
      expect(memberA({ ...request, ...other }), JSON.stringify(other)).not.toBe(token);
    }
    expect(requestBoundTokens(SecretBox.withKey(randomBytes(32)))(request)).not.toBe(token);
  });

  it('without a request_id, or without a key, every token is new', () => {
    const { requestId: _, ...withoutId } = request;
    expect(memberA(withoutId)).not.toBe(memberA(withoutId));
    const unkeyed = requestBoundTokens(SecretBox.unkeyed());
    expect(unkeyed(request)).not.toBe(unkeyed(request));
  });
});

describe('issueTokenIfAsked', () => {
  it('a retried body gets the same token_sha256 in its paras, so the request_id check sees the same request', () => {
    const body = envelope('create_token', { name: 'robot', role: 'viewer' }, { request_id: 'r-1' });
    const first = issueTokenIfAsked(body, 'create_token', 'ops-admin', memberA);
    const retry = issueTokenIfAsked(structuredClone(body), 'create_token', 'ops-admin', memberB);
    expect(first?.token).toBe(memberA(request));
    expect(retry).toEqual(first);
    expect((first?.body.paras as { token_sha256: string }).token_sha256).toBe(tokenDigest(String(first?.token)));
  });

  it('a body that brings its own digest is left as it is', () => {
    const body = envelope('create_token', { name: 'robot', role: 'viewer', token_sha256: 'a'.repeat(64) }, { request_id: 'r-1' });
    expect(issueTokenIfAsked(body, 'create_token', 'ops-admin', memberA)).toBeUndefined();
  });
});

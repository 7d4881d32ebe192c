// A move or repartition logs in to shard masters with the password the engines take now:
// after a rotation that failed part-way, the storage account's new password once every node
// has it (secrets/live-accounts.ts), not the stored one the nodes no longer accept.

import { describe, expect, it } from 'vitest';
import { masterLogin } from '../../../src/jobs/repartition/check';
import { cluster } from '../../helpers/cluster-state';
import { storedAccount, testSecretBox } from '../../../../../test/helpers/secrets';

function clusterWithStorage(password: string) {
  const c = cluster('7', 'ready', [['1', '127.0.2.1', 57001]], []);
  c.accounts = { ...c.accounts, storage: storedAccount({ user: 'kcm_storage', password }) };
  return c;
}

describe('shard master logins of moves and repartitions', () => {
  it('use the stored storage password when no rotation is under way', () => {
    expect(masterLogin(testSecretBox(), clusterWithStorage('old-secret'), '71')).toEqual({ host: '127.0.2.1', port: 57001, user: 'kcm_storage', password: 'old-secret' });
  });

  it('use the rotated storage password once every node has it, though the rotation has not finished', () => {
    const c = clusterWithStorage('old-secret');
    c.passwordRotation = { jobId: '9', accounts: { storage: storedAccount({ user: 'kcm_storage', password: 'new-secret' }) }, applied: ['storage'], startedAt: 0 };
    expect(masterLogin(testSecretBox(), c, '71').password).toBe('new-secret');
    c.passwordRotation.applied = [];
    expect(masterLogin(testSecretBox(), c, '71').password).toBe('old-secret');
  });
});

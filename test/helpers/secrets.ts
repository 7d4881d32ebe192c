// The managers' secrets key in tests: one fixed key, in one file (mode 0600) that every
// fixture's config names, so that a test can open what the managers sealed (to reach an
// instance with an account read from the state) and every member of a group shares it.

import { createHash } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openAccounts, sealAccount, SecretBox, type ClusterAccounts, type DbAccount, type OpenAccounts, type StoredAccount } from '@kcm/manager';

/** Not secret: a test key. */
export const TEST_SECRETS_KEY = createHash('sha256').update('kcm test secrets key').digest();

export const testSecretBox = (): SecretBox => SecretBox.withKey(TEST_SECRETS_KEY);

/** The key file to put in a test manager's config as `secretsKeyFile`. */
export function testSecretsKeyFile(): string {
  const file = path.join(os.tmpdir(), 'kcm-test-secrets.key');
  if (!existsSync(file) || !readFileSync(file).equals(TEST_SECRETS_KEY)) {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, TEST_SECRETS_KEY, { mode: 0o600 });
    renameSync(tmp, file);
  }
  chmodSync(file, 0o600);
  return file;
}

/** A cluster's accounts from the replicated state, with their passwords opened. */
export const openTestAccounts = (accounts: ClusterAccounts): OpenAccounts => openAccounts(testSecretBox(), accounts);

/** An account as the state keeps it (for tests that write state directly). */
export const storedAccount = (account: DbAccount): StoredAccount => sealAccount(testSecretBox(), account);

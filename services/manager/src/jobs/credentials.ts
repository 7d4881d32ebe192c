// The database accounts of a new cluster. Generated once, in the job step that places the
// cluster, and committed with it: the replicated metadata is the source of truth for them
// (a new leader resuming the job, and every later job on the cluster, read them from there).
// They travel to agents only inside gRPC messages and are never logged. They are sealed
// before they leave this module: the command that commits them carries ciphertext only.

import { randomBytes } from 'node:crypto';
import type { ClusterAccounts } from '../meta/state';
import { sealAccounts, type DbAccount, type OpenAccounts } from '../secrets/accounts';
import type { SecretBox } from '../secrets/secret-box';

/** 24 characters of [A-Za-z0-9_-]: 144 random bits, and nothing any SQL or shell layer must escape. */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

function account(prefix: string): DbAccount {
  // A random suffix: user names are not secrets, but need not be guessable either.
  return { user: `${prefix}_${randomBytes(4).toString('hex')}`, password: generatePassword() };
}

/**
 * One account per role. The storage and computer accounts are handed to the client in the
 * job result; the admin (the agents' own) and replication accounts never leave kcm.
 */
export function generateClusterAccounts(box: SecretBox): ClusterAccounts {
  return sealAccounts(box, generateOpenAccounts());
}

function generateOpenAccounts(): OpenAccounts {
  return {
    admin: account('kcm_admin'),
    replication: account('kcm_repl'),
    storage: account('storage'),
    computer: account('computer'),
  };
}

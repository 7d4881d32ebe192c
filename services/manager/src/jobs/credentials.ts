// The database accounts of a new cluster. Generated once, in the job step that places the
// cluster, and committed with it: the replicated metadata is the source of truth for them
// (a new leader resuming the job, and every later job on the cluster, read them from there).
// They travel to agents only inside gRPC messages and are never logged.

import { randomBytes } from 'node:crypto';
import type { ClusterAccounts, DbAccount } from '../meta/state';

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
export function generateClusterAccounts(): ClusterAccounts {
  return {
    admin: account('kcm_admin'),
    replication: account('kcm_repl'),
    storage: account('storage'),
    computer: account('computer'),
  };
}

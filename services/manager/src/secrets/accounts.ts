// Clear accounts exist only for the agent call or the reply that needs them: made from the
// sealed ones in the replicated state at the moment of use, never stored.

import type { ClusterAccounts, StoredAccount } from '../meta/state';
import type { SecretBox } from './secret-box';

/** A database account with its clear password. */
export interface DbAccount {
  user: string;
  password: string;
}

export type OpenAccounts = ClusterAccounts<DbAccount>;

export function openAccount(box: SecretBox, account: StoredAccount): DbAccount {
  return { user: account.user, password: box.open(account.sealedPassword) };
}

export function sealAccount(box: SecretBox, account: DbAccount): StoredAccount {
  return { user: account.user, sealedPassword: box.seal(account.password) };
}

export function openAccounts(box: SecretBox, accounts: ClusterAccounts): OpenAccounts {
  return {
    admin: openAccount(box, accounts.admin),
    replication: openAccount(box, accounts.replication),
    storage: openAccount(box, accounts.storage),
    computer: openAccount(box, accounts.computer),
  };
}

export function sealAccounts(box: SecretBox, accounts: OpenAccounts): ClusterAccounts {
  return {
    admin: sealAccount(box, accounts.admin),
    replication: sealAccount(box, accounts.replication),
    storage: sealAccount(box, accounts.storage),
    computer: sealAccount(box, accounts.computer),
  };
}

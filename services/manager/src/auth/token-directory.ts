// Where the gateway finds a token: the manager config's tokens (a bootstrap admin, so a
// brand-new group is reachable) and the tokens made by create_token, kept in the replicated
// state. Both hold only the SHA-256 of each token (see gateway/auth.ts for why that is enough).
//
// A member answers from its own applied state: a token created or deleted a moment ago may
// be unknown or still known on a follower that has not applied that entry yet (milliseconds).

import type { Identity } from '@kcm/protocol';
import type { ManagerConfig } from '../config';
import type { TokenLookup } from '../gateway/auth';
import type { MetaState } from '../meta/state';

export function tokenDirectory(configTokens: ManagerConfig['tokens'], state: () => MetaState): TokenLookup {
  const fromConfig = new Map<string, Identity>(configTokens.map((t) => [t.sha256, { name: t.name, role: t.role }]));
  return (sha256Hex) => {
    const configured = fromConfig.get(sha256Hex);
    if (configured) return configured;
    // A handful of tokens: a scan costs less than keeping an index in step with apply.
    for (const name in state().tokens) {
      const token = state().tokens[name];
      if (token.sha256 === sha256Hex) return { name: token.name, role: token.role };
    }
    return undefined;
  };
}

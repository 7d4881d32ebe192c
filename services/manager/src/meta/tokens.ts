// Apply functions of Emit tokens (create_token, delete_token): only digests are stored.

import { own } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { MetaState } from './state';
import type { Role } from '@kcm/protocol';
import type { CommandBase, CommandKind } from './command-numbers';

/** An Emit token made by create_token: its digest only; names are unique, and so are digests. */
export interface TokenCreated extends CommandBase<typeof CommandKind.TokenCreated> {
  name: string;
  role: Role;
  sha256: string;
  createdBy: string;
}

export interface TokenDeleted extends CommandBase<typeof CommandKind.TokenDeleted> {
  name: string;
}

export function applyTokenCreated(state: MetaState, cmd: TokenCreated): ApplyOutcome<{ duplicate: boolean }> {
  const existing = own(state.tokens, cmd.name);
  // A re-run step (a new leader resuming the job) finds its own token: done already.
  if (existing) return existing.sha256 === cmd.sha256 ? accepted({ duplicate: true }) : refused('CONFLICT', `paras.name: token ${cmd.name} already exists`);
  if (Object.values(state.tokens).some((t) => t.sha256 === cmd.sha256)) return refused('CONFLICT', 'paras.token_sha256: another token has this digest');
  state.tokens[cmd.name] = { name: cmd.name, role: cmd.role, sha256: cmd.sha256, createdAt: cmd.at, createdBy: cmd.createdBy };
  return accepted({ duplicate: false });
}

export function applyTokenDeleted(state: MetaState, cmd: TokenDeleted): ApplyOutcome<null> {
  // Deleting a token that is gone already is done: a re-run step, or two deletes in a row.
  delete state.tokens[cmd.name];
  return accepted(null);
}

// Job family: Emit tokens (create_token, delete_token; beyond the spec's list, issue 16).
// A token is recorded as its SHA-256 only: the member that received create_token made the
// token and put its digest in the paras (gateway/token-issue.ts), or the caller did.

import { KcmError, type ParasOf } from '@kcm/protocol';
import { CommandKind } from '../meta/commands';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import { orThrow } from './framework/errors';
import type { JobOf } from './framework/workflow';

/** Every token job runs in one queue: a create and a delete of one name never interleave. */
const TOKEN_LOCK = 'tokens';

function checkCreate(p: ParasOf<'create_token'>, state: MetaState): void {
  if (own(state.tokens, p.name)) throw KcmError.of('CONFLICT', `paras.name: token ${p.name} already exists`, { field: 'paras.name' });
  if (p.token_sha256 === undefined) throw KcmError.of('INVALID_PARAS', 'paras.token_sha256: missing (the receiving member adds it when it makes the token)', { field: 'paras.token_sha256' });
}

export const createToken: JobOf<'create_token', { 'record token': null }> = {
  jobType: 'create_token',
  validate: checkCreate,
  lockKey: () => TOKEN_LOCK,
  steps: (p) => [
    {
      name: 'record token',
      async run(ctx) {
        const createdBy = ctx.state().jobs[ctx.jobId]?.submittedBy ?? '';
        orThrow(await ctx.propose({ kind: CommandKind.TokenCreated, at: ctx.now(), name: p.name, role: p.role, sha256: p.token_sha256 ?? '', createdBy }));
        return null;
      },
    },
  ],
  result: (_o, p) => ({ name: p.name, role: p.role }),
};

export const deleteToken: JobOf<'delete_token', { 'delete token': null }> = {
  jobType: 'delete_token',
  validate(p, state) {
    if (!own(state.tokens, p.name)) throw KcmError.of('NOT_FOUND', `paras.name: token ${p.name} does not exist (tokens in the managers' config are changed there)`, { field: 'paras.name' });
  },
  lockKey: () => TOKEN_LOCK,
  steps: (p) => [
    {
      name: 'delete token',
      async run(ctx) {
        orThrow(await ctx.propose({ kind: CommandKind.TokenDeleted, at: ctx.now(), name: p.name }));
        return null;
      },
    },
  ],
  result: () => ({}),
};

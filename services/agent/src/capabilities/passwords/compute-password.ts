// The compute account's new password on one PostgreSQL instance (rotate_cluster_passwords):
// ALTER ROLE with a SCRAM verifier, so the clear password never reaches the server, its
// log or an error. Setting it again is harmless (a resumed rotation).

import type { AgentContext } from '../../capability';
import { AgentFailure, type SetComputePasswordReply, type SetComputePasswordRequest } from '@kcm/agent-api';
import { ident, literal, withAdmin } from '../postgres/admin-session';
import { InstanceRegistry, validatePort } from '../postgres/layout';
import { scramSha256Verifier } from '../postgres/scram';
import path from 'node:path';

export async function setComputePassword(ctx: AgentContext, req: SetComputePasswordRequest): Promise<SetComputePasswordReply> {
  const instance = await new InstanceRegistry(path.join(ctx.stateDir, 'postgres')).get(validatePort(req.port));
  // Only the account this instance was installed with: no other role's password is kcm's to change.
  if (req.user !== instance.user) throw new AgentFailure('invalid_argument', `user ${JSON.stringify(req.user)} is not the compute account of the instance on port ${instance.port} (${instance.user})`);
  if (req.password.length < 8 || req.password.length > 200 || /[\0-\x1f\x7f]/.test(req.password)) throw new AgentFailure('invalid_argument', 'password must be 8-200 printable characters');
  await withAdmin(instance, 'postgres', (db) => db.query(`ALTER ROLE ${ident(instance.user)} WITH PASSWORD ${literal(scramSha256Verifier(req.password))}`));
  ctx.logger.info({ port: instance.port, user: instance.user }, 'compute account password set');
  return { user: instance.user };
}

// The PasswordAgent service (proto/agent-passwords.proto): new passwords for a cluster's
// generated accounts on this host's instances. Each command runs once per op_id (the op
// ledger keeps its reply, which holds no password) and is idempotent besides.

import type * as grpc from '@grpc/grpc-js';
import { PasswordAgentService, type SetComputePasswordRequest, type SetMariaDbPasswordsRequest, type SetReplicationPasswordRequest } from '@kcm/agent-api';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import { setComputePassword } from './compute-password';
import { setMariaDbPasswords, setReplicationPassword } from './mariadb-passwords';

export const passwordsCapability: CapabilityModule = {
  name: 'passwords',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'passwords' });
    const once = <Req extends { op_id: string }, Res>(name: string, run: (req: Req) => Promise<Res>) =>
      unary(log, `Password.${name}`, (req: Req) => ctx.ops.run(`passwords.${name}.${req.op_id}`, () => run(req)));
    server.addService(PasswordAgentService.service, {
      SetMariaDbPasswords: once('SetMariaDbPasswords', (req: SetMariaDbPasswordsRequest) => setMariaDbPasswords(ctx, req)),
      SetReplicationPassword: once('SetReplicationPassword', (req: SetReplicationPasswordRequest) => setReplicationPassword(ctx, req)),
      SetComputePassword: once('SetComputePassword', (req: SetComputePasswordRequest) => setComputePassword(ctx, req)),
    });
  },
};

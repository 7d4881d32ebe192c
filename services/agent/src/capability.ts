// What a capability module gets from the agent, and how it plugs into the gRPC server.
// Each capability family has its own .proto service and module; server.ts registers every
// module listed in capabilities/index.ts.

import type * as grpc from '@grpc/grpc-js';
import type { Logger } from '@kcm/common';
import type { Engines } from './capabilities/engines/engines';
import type { OpLedger } from './ops/op-ledger';
import type { InstanceSupervisor } from './capabilities/supervisor';

export interface AgentContext {
  hostaddr: string;
  logger: Logger;
  /** Engine versions in the host-wide cache; each instance runs the version its record names. */
  engines: Engines;
  /** The agent's own state (op ledger, instance registry); survives agent restarts. */
  stateDir: string;
  ops: OpLedger;
  /** Brings back instances wanted running (capabilities register their engine and record desired states). */
  supervisor: InstanceSupervisor;
}

export interface CapabilityModule {
  name: string;
  register(server: grpc.Server, ctx: AgentContext): void;
}

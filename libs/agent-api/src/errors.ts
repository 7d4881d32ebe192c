// Typed agent failures, both sides of the wire.
//
// The agent answers a failed command with a gRPC status code that says what kind of
// failure it was (agentStatusOf); the manager turns any failed agent call into a catalog
// error name in one place (catalogErrorOf), so the same outage reads the same in every job.

import * as grpc from '@grpc/grpc-js';
import type { ErrorName } from '@kcm/protocol';

/** The agent did not answer: nothing listens, the connection broke, or the deadline passed. */
export class AgentUnreachableError extends Error {
  constructor(readonly address: string, cause: unknown) {
    super(`agent at ${address} is unreachable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'AgentUnreachableError';
  }
}

/** The agent answered, with a failure: `code` is the gRPC status it chose (agentStatusOf). */
export class AgentCallError extends Error {
  constructor(readonly address: string, readonly code: grpc.status, message: string) {
    super(message);
    this.name = 'AgentCallError';
  }
}

/** What kind of failure an agent command met; each kind travels as one gRPC status code. */
export type AgentFailureKind = 'invalid_argument' | 'not_found' | 'failed_precondition' | 'instance_failed' | 'unavailable' | 'no_space';

const STATUS_OF_KIND: Record<AgentFailureKind, grpc.status> = {
  invalid_argument: grpc.status.INVALID_ARGUMENT,
  not_found: grpc.status.NOT_FOUND,
  failed_precondition: grpc.status.FAILED_PRECONDITION,
  instance_failed: grpc.status.ABORTED,
  unavailable: grpc.status.UNAVAILABLE,
  // A full disk (disk-space.ts): the manager reports it as NO_RESOURCES.
  no_space: grpc.status.RESOURCE_EXHAUSTED,
};

/** A failure the agent classified where it happened. */
export class AgentFailure extends Error {
  constructor(readonly kind: AgentFailureKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AgentFailure';
  }
}

/**
 * The status an agent answers a failed command with. Besides its own AgentFailure, an
 * engine's or tool's failure (a SQL error from mariadbd or postgres, a tool that exited
 * non-zero, an instance that refuses connections) is instance_failed; anything else is a
 * bug of the agent (INTERNAL).
 */
export function agentStatusOf(err: unknown): grpc.status {
  if (err instanceof AgentFailure) return STATUS_OF_KIND[err.kind];
  if (isEngineFailure(err)) return grpc.status.ABORTED;
  return grpc.status.INTERNAL;
}

function isEngineFailure(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const e = err as Error & { sqlState?: unknown; severity?: unknown; code?: unknown; exitCode?: unknown };
  if (e.name === 'ExecError') return true; // a tool (mariadbd, mariabackup, initdb, pg_ctl) failed
  if (typeof e.sqlState === 'string') return true; // mysql2: the server refused a statement
  if (typeof e.severity === 'string' && typeof e.code === 'string') return true; // pg: the server refused a statement
  return e.code === 'ECONNREFUSED' || e.code === 'ENOENT' && /\.sock/.test(e.message); // the local instance is not listening
}

/** An agent call's failure as thrown to the caller: unreachable, or the agent's typed answer. */
export function agentCallFailure(address: string, err: grpc.ServiceError): Error {
  if (isUnreachableStatus(err.code)) return new AgentUnreachableError(address, err);
  return new AgentCallError(address, err.code, err.message);
}

function isUnreachableStatus(code: grpc.status): boolean {
  return code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED || code === grpc.status.CANCELLED;
}

const CATALOG_OF_STATUS = new Map<grpc.status, ErrorName>([
  [grpc.status.INVALID_ARGUMENT, 'INVALID_PARAS'],
  [grpc.status.NOT_FOUND, 'NOT_FOUND'],
  [grpc.status.FAILED_PRECONDITION, 'INSTANCE_FAILED'],
  [grpc.status.ABORTED, 'INSTANCE_FAILED'],
  [grpc.status.RESOURCE_EXHAUSTED, 'NO_RESOURCES'],
  [grpc.status.UNIMPLEMENTED, 'UNSUPPORTED'],
  // A stored backup object whose bytes no longer match its checksum (BackupStorageAgent.Get).
  [grpc.status.DATA_LOSS, 'DATA_CHECK_FAILED'],
]);

/**
 * The catalog error an agent failure reports, looking through `cause` chains (a job that
 * adds context wraps the agent's error); undefined when no agent failure is in the chain.
 */
export function catalogErrorOf(err: unknown): ErrorName | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof AgentUnreachableError) return 'AGENT_UNREACHABLE';
    if (e instanceof AgentCallError) return isUnreachableStatus(e.code) ? 'AGENT_UNREACHABLE' : (CATALOG_OF_STATUS.get(e.code) ?? 'INTERNAL');
  }
  return undefined;
}

/** True when the agent of the failed call did not answer (directly or as a cause). */
export function isAgentUnreachable(err: unknown): boolean {
  return catalogErrorOf(err) === 'AGENT_UNREACHABLE';
}

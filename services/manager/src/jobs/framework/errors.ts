// One place that turns whatever a step threw into the catalog error the job reports.

import { catalogErrorOf } from '@kcm/agent-api';
import { KcmError, type ErrorName } from '@kcm/protocol';
import type { ApplyOutcome } from '../../meta/outcome';

/** What a failed step reports: the catalog error and its message. */
export interface StepFailure {
  errorName: ErrorName;
  message: string;
}

/**
 * Whatever a step threw, as the catalog error the job reports. Read off the thrown value,
 * not wrapped in a new KcmError: a failing step is an everyday outcome (an agent down), and
 * each Error built captures a stack, which cost the leader 3% of its CPU in bench/emit.
 */
export function stepFailureOf(err: unknown): StepFailure {
  return { errorName: errorNameOf(err), message: err instanceof Error ? err.message : String(err) };
}

/**
 * The catalog error of a failure: its own (KcmError), else the one of the agent call that
 * failed, however deep in the causes (@kcm/agent-api catalogErrorOf: the one mapping of
 * gRPC failures), else `fallback`.
 */
export function errorNameOf(err: unknown, fallback: ErrorName = 'INTERNAL'): ErrorName {
  if (err instanceof KcmError) return err.errorName;
  return catalogErrorOf(err) ?? fallback;
}

/** The value of an accepted command, or its refusal as the KcmError of the same name. */
export function orThrow<T>(outcome: ApplyOutcome<T>): T {
  if (!outcome.ok) throw KcmError.of(outcome.refusal, outcome.message);
  return outcome.value;
}

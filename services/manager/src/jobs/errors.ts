// One place that turns whatever a step threw into the catalog error the job reports.

import { AgentUnreachableError } from '@kcm/agent';
import { KcmError } from '@kcm/protocol';
import type { ApplyOutcome } from '../meta/outcome';

export function toKcmError(err: unknown): KcmError {
  if (err instanceof KcmError) return err;
  if (err instanceof AgentUnreachableError) return KcmError.of('AGENT_UNREACHABLE', err.message, { cause: err });
  return KcmError.of('INTERNAL', err instanceof Error ? err.message : String(err), { cause: err });
}

/** The value of an accepted command, or its refusal as the KcmError of the same name. */
export function orThrow<T>(outcome: ApplyOutcome<T>): T {
  if (!outcome.ok) throw KcmError.of(outcome.refusal, outcome.message);
  return outcome.value;
}

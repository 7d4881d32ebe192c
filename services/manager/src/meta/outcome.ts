// What applying a command returns. Apply never throws for a domain refusal: every member
// must reach the same verdict from the same state, and the proposer turns a refusal
// into a KcmError with the same catalog name (orThrow in ../jobs/framework/errors.ts).

// NO_LEADER: a submission whose audit record was numbered by a leader with an old view of
// the chain (meta/audit.ts); the member that received it sends it again.
export type RefusalName = 'CONFLICT' | 'NOT_FOUND' | 'NO_RESOURCES' | 'INVALID_PARAS' | 'NO_LEADER' | 'OVERLOADED';

export type ApplyOutcome<T = unknown> = { ok: true; value: T } | { ok: false; refusal: RefusalName; message: string };

export const accepted = <T>(value: T): ApplyOutcome<T> => ({ ok: true, value });
export const refused = (refusal: RefusalName, message: string): ApplyOutcome<never> => ({ ok: false, refusal, message });

// The audit trail in the replicated state: the chain's tip and the newest records, kept
// through snapshots. Records come with JobSubmitted entries (audit/chain.ts); apply links a
// record only when it follows the tip, so every member holds the same chain.

import { GENESIS_TIP, linkOf, type AuditRecord, type AuditTip } from '../audit/chain';
import { refused, type ApplyOutcome } from './outcome';

/**
 * Records kept in the state (and so in every snapshot): the newest AUDIT_RECORDS_KEPT.
 * The state is one snapshot image, written and read whole, so it cannot grow without end
 * (records are ~300-500 bytes: 10,000 add ~4 MB to an image). Older records stay in the
 * Raft log until it is compacted; the tip (its number and hash) is always kept, so the
 * chain continues across pruning. Kept apart from the job history: pruning jobs
 * (finishedJobsKept) never drops a record.
 */
export const AUDIT_RECORDS_KEPT = 10_000;

export interface AuditStateRecord extends AuditRecord {
  /** The job the submission created or found again ('' when apply refused it); not covered by the hash. */
  jobId: string;
}

export interface AuditState {
  tip: AuditTip;
  /** Oldest first. */
  records: AuditStateRecord[];
}

export function emptyAuditState(): AuditState {
  return { tip: { ...GENESIS_TIP }, records: [] };
}

/**
 * Links `record` to the chain, or refuses the submission that carries it. A record that
 * does not follow the tip was numbered by a leader with an old view of the chain (another
 * leader's records came first): refused as NO_LEADER, which the member that received the
 * request answers by sending it again (same request_id), numbered afresh.
 */
export function linkAuditRecord(state: { audit: AuditState }, record: AuditRecord): ApplyOutcome<never> | AuditStateRecord {
  const link = linkOf(state.audit.tip, record);
  if (link !== 'linked') {
    return refused('NO_LEADER', `audit record ${record.seq} does not follow the audit chain's record ${state.audit.tip.seq} (${link}); retry with the same request_id`);
  }
  const kept: AuditStateRecord = { ...record, jobId: '' };
  state.audit.tip = { seq: record.seq, hash: record.hash };
  state.audit.records.push(kept);
  if (state.audit.records.length > AUDIT_RECORDS_KEPT) state.audit.records.splice(0, state.audit.records.length - AUDIT_RECORDS_KEPT);
  return kept;
}

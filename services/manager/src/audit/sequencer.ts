// The leader's side of the audit chain: numbers and chains each submission's record as it
// is proposed. Proposals reach the Raft log in the order they are made (RaftMetaStore keeps
// call order), so records proposed one after another by one leader link up. The sequencer
// continues from its own last record while some of its records are still on their way,
// and from the applied state's tip otherwise (a new leader, or the applied chain caught up
// with it). A record refused at apply (another leader's record took its number) resets it.

import { sealRecord, type AuditRecord, type AuditTip } from './chain';

export class AuditSequencer {
  private proposed: AuditTip | null = null;

  /** The next record, chained after the last one proposed here or, if the applied chain has caught up with that, after the applied tip. */
  next(appliedTip: AuditTip, fields: Omit<AuditRecord, 'seq' | 'prevHash' | 'hash'>): AuditRecord {
    const tip = this.proposed === null || appliedTip.seq >= this.proposed.seq ? appliedTip : this.proposed;
    const record = sealRecord(tip, fields);
    this.proposed = { seq: record.seq, hash: record.hash };
    return record;
  }

  /** A proposal failed or its record was refused: start again from the applied tip. */
  reset(): void {
    this.proposed = null;
  }
}

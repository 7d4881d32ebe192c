// Queries of tokens and the audit trail (admin only, libs/protocol roles.ts).

import type { ParasOf } from '@kcm/protocol';
import type { QueryHandler } from '../submit/manager-service';
import type { MetaState } from '../meta/state';

/** list_tokens: names and roles (and where each is defined), never a token or its digest. */
export function listTokens(configTokens: readonly { name: string; role: string }[]): QueryHandler {
  return (_req, state: MetaState) => ({
    list_token: [
      ...configTokens.map((t) => ({ name: t.name, role: t.role, source: 'config', created_by: '', created_at: '' })),
      ...Object.values(state.tokens)
        .sort((a, b) => a.createdAt - b.createdAt || a.name.localeCompare(b.name))
        .map((t) => ({ name: t.name, role: t.role, source: 'replicated', created_by: t.createdBy, created_at: String(Math.floor(t.createdAt / 1000)) })),
    ],
  });
}

/** get_audit: the newest `limit` records (100 by default) from `since` on, oldest first, and the chain's tip. */
export const getAudit: QueryHandler = (req, state) => {
  const paras = req.paras as ParasOf<'get_audit'>;
  const limit = paras.limit === undefined ? 100 : Number(paras.limit);
  const since = paras.since === undefined ? 0 : Number(paras.since);
  const records = state.audit.records.filter((r) => r.seq >= since).slice(-limit);
  return {
    tip_seq: String(state.audit.tip.seq),
    tip_hash: state.audit.tip.hash,
    // Records older than these are no longer in the state (AUDIT_RECORDS_KEPT), only in the Raft log until it is compacted.
    oldest_kept_seq: String(state.audit.records[0]?.seq ?? 0),
    list_audit: records.map((r) => ({
      seq: String(r.seq),
      time: new Date(r.at).toISOString(),
      by: r.by,
      role: r.role,
      client: r.client,
      via: r.via,
      job_type: r.sentJobType,
      job_id: r.jobId,
      request_id: r.requestId ?? '',
      paras: r.paras,
      prev_hash: r.prevHash,
      hash: r.hash,
    })),
  };
};

// What an idempotency key (request_id) stands for: the job type and the validated paras.
// A retry with the same key must carry the same request; the same key with another body is
// CONFLICT, never the first job's id (that silently dropped the second request's change).

import { createHash } from 'node:crypto';

/** JSON with every object's keys sorted, so key order as sent does not make two bodies differ. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const fields = Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The digest recorded with a job submitted under a request id, computed by the proposer.
 * Over the canonical job type (an alias and its canonical spelling are the same request)
 * and the paras as validated (numbers parsed, defaults filled), so only a request that
 * would do something else differs; before a name in them is resolved to an id, so a retry
 * finds its job even after the job removed what the name named.
 */
export function requestDigest(jobType: string, paras: unknown): string {
  return createHash('sha256').update(canonicalJson({ jobType, paras })).digest('base64url');
}

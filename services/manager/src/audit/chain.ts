// The audit trail's records and their hash chain. Each accepted submission (a JobSubmitted
// entry) carries one record: who (token name and role), what (job type and paras, secrets
// redacted), when (the leader's clock), from where (the client's address as the member that
// received it saw it, and that member), its sequence number, the hash of the record before
// it and its own hash over its canonical bytes. The record travels inside the Raft log
// entry, so changing or removing a record in a member's log (or snapshot) breaks the chain
// where it happened: `kcm audit verify` (verify.ts) finds it offline.
//
// The leader numbers and chains records when it proposes them (sequencer.ts); apply links
// a record only when it follows the chain's tip (linkOf), so every member holds the same
// chain, and verify replays exactly that rule.

import { createHash } from 'node:crypto';
import type { Role } from '@kcm/protocol';

export interface AuditRecord {
  /** 1, 2, 3, ...: the record's place in the chain. */
  seq: number;
  /** The leader's clock when it proposed the submission (ms). */
  at: number;
  /** Token name and role of the submitter. */
  by: string;
  role: Role;
  /** The client's address as the receiving member saw it ('' when unknown). */
  client: string;
  /** The member that received the request from the client. */
  via: string;
  jobType: string;
  sentJobType: string;
  /** The paras as sent, with secret-looking values replaced by "<redacted>". */
  paras: Record<string, unknown>;
  requestId: string | null;
  /** Hash of the record before it; GENESIS_HASH for the first. */
  prevHash: string;
  /** sha256 of canonicalBytes(this record). */
  hash: string;
}

export interface AuditTip {
  seq: number;
  hash: string;
}

export const GENESIS_HASH = '0'.repeat(64);
export const GENESIS_TIP: AuditTip = Object.freeze({ seq: 0, hash: GENESIS_HASH });

/**
 * The bytes a record's hash covers: its fields in a fixed order as a JSON array (field order
 * of the parsed object does not matter), the hash itself excluded.
 */
export function canonicalBytes(r: Omit<AuditRecord, 'hash'>): string {
  return JSON.stringify([r.seq, r.at, r.by, r.role, r.client, r.via, r.jobType, r.sentJobType, canonicalValue(r.paras), r.requestId, r.prevHash]);
}

/**
 * A JSON value with every object's keys inserted in sorted order, so equal paras give equal
 * bytes whatever order they were parsed in (null-prototype objects: keys come from clients).
 */
function canonicalValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalValue);
  if (value === null || typeof value !== 'object') return value;
  const out = Object.create(null) as Record<string, unknown>;
  for (const k of Object.keys(value).sort()) out[k] = canonicalValue((value as Record<string, unknown>)[k]);
  return out;
}

export function recordHash(r: Omit<AuditRecord, 'hash'>): string {
  return createHash('sha256').update(canonicalBytes(r), 'utf8').digest('hex');
}

/** The record that follows `tip`, sealed with its hash. */
export function sealRecord(tip: AuditTip, fields: Omit<AuditRecord, 'seq' | 'prevHash' | 'hash'>): AuditRecord {
  const unsealed = { ...fields, seq: tip.seq + 1, prevHash: tip.hash };
  return { ...unsealed, hash: recordHash(unsealed) };
}

/**
 * How a record relates to the chain's tip: `linked` (it follows it), `altered` (its hash is
 * not its content's), `stale` (a number already taken: a leader proposed with an old view),
 * `gap` (numbers are missing before it), `forked` (the right number, another predecessor).
 */
export type Link = 'linked' | 'altered' | 'stale' | 'gap' | 'forked';

export function linkOf(tip: AuditTip, r: AuditRecord): Link {
  const { hash, ...content } = r;
  if (recordHash(content) !== hash) return 'altered';
  if (r.seq <= tip.seq) return 'stale';
  if (r.seq > tip.seq + 1) return 'gap';
  return r.prevHash === tip.hash ? 'linked' : 'forked';
}

const SECRET_KEY = /pass|pwd|secret|token|key|credential/i;
export const REDACTED = '<redacted>';

/** The paras with the value of every secret-looking key (at any depth) replaced by "<redacted>". */
export function redactParas(paras: Record<string, unknown>): Record<string, unknown> {
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(walk);
    if (value === null || typeof value !== 'object') return value;
    const out = Object.create(null) as Record<string, unknown>;
    for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? REDACTED : walk(v);
    return out;
  };
  return walk(paras) as Record<string, unknown>;
}

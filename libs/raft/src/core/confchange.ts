// Single-server membership changes (Raft thesis 4.1, applied as in etcd when the entry is
// applied): the wire encoding of a ConfChange in a 'conf' entry, and the pure function
// that computes the next configuration.

import type { ConfChange, ConfChangeType, ConfState, NodeId } from './types';

const TYPES: readonly ConfChangeType[] = ['addLearner', 'promote', 'remove'];
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeConfChange(cc: ConfChange): Uint8Array {
  return encoder.encode(JSON.stringify({ type: cc.type, node: cc.node }));
}

/**
 * What the leader writes in a 'conf' entry: the change plus the whole configuration
 * after it. A node that joins with an empty storage replays the log from index 1 and
 * never saw the bootstrap configuration; `confAfter` gives it the membership anyway.
 */
export function encodeConfEntry(cc: ConfChange, confAfter: ConfState): Uint8Array {
  return encoder.encode(JSON.stringify({ type: cc.type, node: cc.node, conf: confAfter }));
}

export interface DecodedConfEntry {
  cc: ConfChange;
  /** Absent in entries written by encodeConfChange alone. */
  confAfter?: ConfState;
}

export function decodeConfEntry(data: Uint8Array): DecodedConfEntry {
  const parsed: unknown = JSON.parse(decoder.decode(data));
  const p = parsed as { type?: unknown; node?: unknown; conf?: { voters?: unknown; learners?: unknown } };
  if (typeof p !== 'object' || p === null || !TYPES.includes(p.type as ConfChangeType) || typeof p.node !== 'string') {
    throw new Error(`not a ConfChange: ${decoder.decode(data)}`);
  }
  const cc: ConfChange = { type: p.type as ConfChangeType, node: p.node };
  const conf = p.conf;
  if (conf && isIdList(conf.voters) && isIdList(conf.learners)) {
    return { cc, confAfter: { voters: [...conf.voters], learners: [...conf.learners] } };
  }
  return { cc };
}

export function decodeConfChange(data: Uint8Array): ConfChange {
  return decodeConfEntry(data).cc;
}

function isIdList(v: unknown): v is NodeId[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/**
 * Why `cc` cannot be applied to `conf`, or null if it can. The leader refuses such
 * proposals up front; a node applying a committed one that is invalid ignores it.
 */
export function confChangeProblem(conf: ConfState, cc: ConfChange): string | null {
  const isVoter = conf.voters.includes(cc.node);
  const isLearner = conf.learners.includes(cc.node);
  switch (cc.type) {
    case 'addLearner':
      return isVoter || isLearner ? `${cc.node} is already a member` : null;
    case 'promote':
      return isLearner ? null : `${cc.node} is not a learner`;
    case 'remove':
      if (!isVoter && !isLearner) return `${cc.node} is not a member`;
      if (isVoter && conf.voters.length === 1) return `cannot remove the last voter ${cc.node}`;
      return null;
  }
}

/** The configuration after applying `cc` (a new object; `conf` is not modified). */
export function applyConfChangeTo(conf: ConfState, cc: ConfChange): ConfState {
  const without = (ids: NodeId[]) => ids.filter((id) => id !== cc.node);
  switch (cc.type) {
    case 'addLearner':
      return { voters: [...conf.voters], learners: [...conf.learners, cc.node] };
    case 'promote':
      return { voters: [...conf.voters, cc.node], learners: without(conf.learners) };
    case 'remove':
      return { voters: without(conf.voters), learners: without(conf.learners) };
  }
}

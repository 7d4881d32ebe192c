// A member stops applying the metadata log at a command kind it does not know.
//
// Such an entry was proposed by a newer kcm (or holds a retired number). Skipping it, or
// applying it as a refusal, would leave this member's state different from the members that
// know the kind, with nothing to show for it: every later command would be applied to a
// different state. So apply throws, the Raft driver stops the member (libs/raft node.ts: a
// throw from apply is fatal), and the member reports where it stopped until it is replaced by
// a kcm that knows the kind. It does the same again after a restart, at the same entry.
// Nomad does the same (nomad/fsm.go panics on an unknown message type).

import { Gauge, type Registry } from 'prom-client';

/** Thrown by apply for a command kind this kcm does not know; nothing of the entry took effect. */
export class UnknownCommandKindError extends Error {
  override readonly name = 'UnknownCommandKindError';
  /** The kind as the entry holds it (a number from a newer kcm, or whatever a malformed entry holds). */
  readonly kind: unknown;
  /** The log entry that holds it, when known (the state machine adds it). */
  readonly index?: number;

  constructor(kind: unknown, index?: number) {
    super(
      `${index === undefined ? 'a command' : `log entry ${index}`} holds command kind ${JSON.stringify(kind) ?? String(kind)}, which this kcm does not know ` +
        '(proposed by a newer kcm, or a retired number): this member stops applying the metadata log here rather than skip it and diverge ' +
        'from the group; run a kcm version that knows this kind on this member',
    );
    this.kind = kind;
    if (index !== undefined) this.index = index;
  }
}

/** Where a member stopped applying, as its status and metrics report it. */
export interface ApplyStop {
  index: number;
  term: number;
  kind: unknown;
  message: string;
}

/** kcm_meta_apply_stopped_index: 0 while the member applies; the entry's index once it stopped at one. */
export function registerApplyStopMetric(registry: Registry, applyStop: () => ApplyStop | undefined): void {
  new Gauge({
    name: 'kcm_meta_apply_stopped_index',
    help: 'Index of the committed log entry this member stopped applying at because it holds a command kind this kcm does not know (upgrade the member); 0 while it applies',
    registers: [registry],
    collect() {
      this.set(applyStop()?.index ?? 0);
    },
  });
}

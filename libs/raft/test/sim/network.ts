// A seeded in-memory network between simulated nodes. Every message gets a random delay
// in ticks (so messages reorder), may be dropped or duplicated, and is lost if a
// partition blocks its link at delivery time. Links are directed, so a one-way
// (asymmetric) partition is just blocking one direction.

import { imageInMemory, type Entry, type Message, type NodeId } from '../../src/core/types';
import type { Prng } from './prng';
import type { Trace } from './trace';

export interface NetworkConfig {
  /** Probability that a message is silently lost. */
  dropRate: number;
  /** Probability that a message is delivered twice (the copy gets its own delay). */
  duplicateRate: number;
  /** Delivery delay in ticks, uniform in [minDelay, maxDelay]; 0 means the next delivery round. */
  minDelay: number;
  maxDelay: number;
}

export const calmNetwork: NetworkConfig = { dropRate: 0, duplicateRate: 0, minDelay: 0, maxDelay: 1 };

interface InFlight {
  deliverAt: number;
  /** Send order, to break ties deterministically among messages due at the same tick. */
  seq: number;
  msg: Message;
}

export class Network {
  private inFlight: InFlight[] = [];
  private seq = 0;
  private readonly blocked = new Set<string>();
  private _sent = 0;
  private _dropped = 0;

  constructor(
    private readonly rng: Prng,
    public config: NetworkConfig,
    private readonly trace: Trace,
  ) {}

  get sent(): number {
    return this._sent;
  }

  get dropped(): number {
    return this._dropped;
  }

  get inFlightCount(): number {
    return this.inFlight.length;
  }

  send(now: number, msg: Message): void {
    this._sent++;
    if (this.rng.chance(this.config.dropRate)) {
      this._dropped++;
      this.trace.record(now, `drop ${describeMessage(msg)}`);
      return;
    }
    const copies = this.rng.chance(this.config.duplicateRate) ? 2 : 1;
    const description = describeMessage(msg);
    for (let c = 0; c < copies; c++) {
      const deliverAt = now + this.rng.range(this.config.minDelay, this.config.maxDelay);
      // A deep copy: the sender's core must not be able to change what is in flight, and
      // the two copies of a duplicate must be independent objects.
      this.inFlight.push({ deliverAt, seq: this.seq++, msg: cloneMessage(msg) });
      this.trace.record(now, `send@${deliverAt}${c > 0 ? ' dup' : ''} ${description}`);
    }
  }

  /** Removes and returns the messages due by `now`, in (deliverAt, send order). Blocked links lose theirs. */
  takeDue(now: number): Message[] {
    const due: InFlight[] = [];
    const rest: InFlight[] = [];
    for (const f of this.inFlight) (f.deliverAt <= now ? due : rest).push(f);
    this.inFlight = rest;
    due.sort((a, b) => a.deliverAt - b.deliverAt || a.seq - b.seq);
    const out: Message[] = [];
    for (const f of due) {
      if (this.isBlocked(f.msg.from, f.msg.to)) {
        this._dropped++;
        this.trace.record(now, `cut ${describeMessage(f.msg)}`);
      } else out.push(f.msg);
    }
    return out;
  }

  isBlocked(from: NodeId, to: NodeId): boolean {
    return this.blocked.has(linkKey(from, to));
  }

  /** Blocks one direction only: `from` can no longer reach `to`, the reverse still works. */
  blockOneWay(from: NodeId, to: NodeId): void {
    this.blocked.add(linkKey(from, to));
  }

  /** A symmetric partition: no message crosses between different groups. */
  partition(groups: NodeId[][]): void {
    for (let g = 0; g < groups.length; g++) {
      for (let h = 0; h < groups.length; h++) {
        if (g === h) continue;
        for (const a of groups[g]) for (const b of groups[h]) this.blockOneWay(a, b);
      }
    }
  }

  heal(): void {
    this.blocked.clear();
  }

  get blockedLinks(): number {
    return this.blocked.size;
  }
}

function linkKey(from: NodeId, to: NodeId): string {
  return `${from}>${to}`;
}

/**
 * A deep copy: the sender's core must not be able to change what is in flight, the two
 * copies of a duplicate must be independent, and no two nodes may share an object.
 * (structuredClone does the same, several times slower.)
 */
export function cloneMessage(m: Message): Message {
  const c: Message = { ...m };
  if (m.entries) c.entries = m.entries.map(cloneEntry);
  if (m.context) c.context = m.context.slice();
  if (m.snapshot) {
    const meta = m.snapshot.meta;
    c.snapshot = {
      meta: { index: meta.index, term: meta.term, conf: { voters: [...meta.conf.voters], learners: [...meta.conf.learners] } },
      data: imageInMemory(m.snapshot.data).slice(),
    };
  }
  return c;
}

export function cloneEntry(e: Entry): Entry {
  return { index: e.index, term: e.term, type: e.type, data: e.data.slice() };
}

/** One compact, deterministic line per message, for the trace. */
export function describeMessage(m: Message): string {
  let s = `${m.type} ${m.from}>${m.to} t${m.term}`;
  if (m.index !== undefined) s += ` i${m.index}`;
  if (m.logTerm !== undefined) s += ` lt${m.logTerm}`;
  if (m.commit !== undefined) s += ` c${m.commit}`;
  if (m.entries && m.entries.length > 0) s += ` e${m.entries[0].index}-${m.entries[m.entries.length - 1].index}`;
  if (m.reject) s += ` rej${m.rejectHint ?? ''}`;
  if (m.snapshot) s += ` snap${m.snapshot.meta.index}/${m.snapshot.meta.term}`;
  if (m.context && m.context.byteLength > 0) s += ` ctx${Buffer.from(m.context).toString('hex')}`;
  return s;
}

// The replicated state machine of the simulator: a string key-value map with put and
// append, plus per-client sessions so that a retried command (same client, same seq)
// takes effect at most once. Reads are not commands: they are served from this map
// after a ReadIndex round (see client.ts).

import type { Entry } from '../../src/core/types';

export type KvWriteOp = 'put' | 'append';

/** One client command, the payload of a 'normal' entry. */
export interface KvCommand {
  clientId: number;
  /** Per-client sequence number; a client has at most one command outstanding. */
  seq: number;
  op: KvWriteOp;
  key: string;
  value: string;
}

interface Session {
  seq: number;
  /** The value of the key right after the command took effect. */
  result: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeCommand(cmd: KvCommand): Uint8Array {
  return encoder.encode(JSON.stringify(cmd));
}

export function decodeCommand(data: Uint8Array): KvCommand {
  return JSON.parse(decoder.decode(data)) as KvCommand;
}

export interface AppliedCommand {
  command: KvCommand;
  /** The value of the key after the command; for a duplicate, the first application's. */
  result: string;
  duplicate: boolean;
}

export class KvMachine {
  private readonly data = new Map<string, string>();
  private readonly sessions = new Map<number, Session>();
  private _applied = 0;

  get applied(): number {
    return this._applied;
  }

  get(key: string): string {
    return this.data.get(key) ?? '';
  }

  /**
   * Applies one committed entry. Entries must come in index order with no gap; conf
   * entries and the new leader's empty no-op change nothing but the applied index.
   */
  apply(entry: Entry): AppliedCommand | null {
    if (entry.index !== this._applied + 1) {
      throw new Error(`state machine applied ${this._applied} but was handed entry ${entry.index}`);
    }
    this._applied = entry.index;
    if (entry.type !== 'normal' || entry.data.byteLength === 0) return null;
    const command = decodeCommand(entry.data);
    const session = this.sessions.get(command.clientId);
    if (session && session.seq >= command.seq) {
      // A retry of a command already applied: answer with the first result, change nothing.
      return { command, result: session.seq === command.seq ? session.result : '', duplicate: true };
    }
    const before = this.data.get(command.key) ?? '';
    const after = command.op === 'put' ? command.value : before + command.value;
    this.data.set(command.key, after);
    this.sessions.set(command.clientId, { seq: command.seq, result: after });
    return { command, result: after, duplicate: false };
  }

  /** A deterministic image (sorted keys) for Raft snapshots. */
  snapshot(): Uint8Array {
    const image = {
      applied: this._applied,
      data: [...this.data.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      sessions: [...this.sessions.entries()].sort(([a], [b]) => a - b),
    };
    return encoder.encode(JSON.stringify(image));
  }

  /** Rebuilds a machine from a snapshot image taken at `index` (empty data = the empty machine). */
  static restore(image: Uint8Array, index: number): KvMachine {
    const m = new KvMachine();
    if (image.byteLength > 0) {
      const parsed = JSON.parse(decoder.decode(image)) as {
        applied: number;
        data: [string, string][];
        sessions: [number, Session][];
      };
      if (parsed.applied !== index) throw new Error(`snapshot image is at ${parsed.applied}, metadata says ${index}`);
      for (const [k, v] of parsed.data) m.data.set(k, v);
      for (const [c, s] of parsed.sessions) m.sessions.set(c, s);
    } else if (index !== 0) {
      throw new Error(`empty snapshot image at index ${index}`);
    }
    m._applied = index;
    return m;
  }
}

// Typed errors of the Raft library. Callers branch on the class (or `code`), never on message text.

import type { NodeId } from './types';

export abstract class RaftError extends Error {
  abstract readonly code: string;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The proposal went to a node that is not the leader; `leader` is its best guess, if any. */
export class NotLeaderError extends RaftError {
  readonly code = 'NOT_LEADER';
  constructor(readonly leader: NodeId | null) {
    super(leader ? `not the leader; the leader is ${leader}` : 'not the leader; no leader is known');
  }
}

/** The proposal was dropped (e.g. a leadership transfer is in progress, or a conf change is pending). */
export class ProposalDroppedError extends RaftError {
  readonly code = 'DROPPED';
  constructor(reason: string) {
    super(`proposal dropped: ${reason}`);
  }
}

/** The leader's uncommitted log exceeds maxUncommittedEntriesSize: back off and retry. */
export class ProposalOverloadedError extends RaftError {
  readonly code = 'OVERLOADED';
  constructor(readonly uncommittedBytes: number, readonly limitBytes: number) {
    super(`proposal rejected: ${uncommittedBytes} bytes uncommitted exceeds the ${limitBytes}-byte cap`);
  }
}

/** The proposal or read did not complete in time; it may still commit later. */
export class TimeoutError extends RaftError {
  readonly code = 'TIMEOUT';
  constructor(what: string, ms: number) {
    super(`${what} timed out after ${ms} ms`);
  }
}

/** The requested index is below the first index in storage (compacted into a snapshot). */
export class CompactedError extends RaftError {
  readonly code = 'COMPACTED';
  constructor(index: number, firstIndex: number) {
    super(`index ${index} is compacted (first index ${firstIndex})`);
  }
}

/** The requested index is above the last index in storage. */
export class UnavailableError extends RaftError {
  readonly code = 'UNAVAILABLE';
  constructor(index: number, lastIndex: number) {
    super(`index ${index} is unavailable (last index ${lastIndex})`);
  }
}

/** A snapshot older than the one already in storage was offered. */
export class SnapshotOutOfDateError extends RaftError {
  readonly code = 'SNAPSHOT_OUT_OF_DATE';
  constructor(index: number, current: number) {
    super(`snapshot at ${index} is older than the stored snapshot at ${current}`);
  }
}

/** The node was stopped (driver closed) while the call was pending. */
export class StoppedError extends RaftError {
  readonly code = 'STOPPED';
  constructor() {
    super('raft node stopped');
  }
}

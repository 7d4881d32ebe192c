// The manager's view of the replicated metadata, as jobs and services use it.

import type { Command } from './commands';
import type { ApplyOutcome } from './outcome';
import type { MetaState } from './state';

/**
 * Read the local state; write only through propose, which resolves once the command is
 * committed and applied locally, with the state machine's outcome. On a Raft-backed store
 * it rejects when this member is not (or stops being) the leader.
 */
export interface MetaStore {
  state(): MetaState;
  propose(cmd: Command): Promise<ApplyOutcome>;
}

/** The manager's clock, ms since the epoch: what stamps the `at` of proposed commands (tests fix it). */
export type Clock = () => number;

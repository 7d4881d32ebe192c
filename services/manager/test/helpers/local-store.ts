// Test helpers: a single-member MetaStore (propose applies at once, through the wire
// encoding) and a polling wait. Enough to test job logic without a Raft group.

import { decodeCommand, encodeCommand, type Command } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { emptyMetaState, type MetaState } from '../../src/meta/state';
import type { MetaStore } from '../../src/meta/store';

export class LocalStore implements MetaStore {
  readonly s: MetaState = emptyMetaState();
  /** Simulates lost leadership: every proposal rejects. */
  failProposals = false;

  state(): MetaState {
    return this.s;
  }

  async propose(cmd: Command) {
    if (this.failProposals) throw new Error('not leader');
    return applyCommand(this.s, decodeCommand(encodeCommand(cmd)) as Command);
  }
}

export async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

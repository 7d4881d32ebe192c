// MetaStore on Raft: reads come from the local state machine, writes are proposed to the
// group and resolve with the apply outcome once committed and applied here.

import { KcmError } from '@kcm/protocol';
import { NotLeaderError, ProposalDroppedError, ProposalOverloadedError, TimeoutError, type RaftNode } from '@kcm/raft';
import { encodeCommand, type Command } from './meta/commands';
import type { ApplyOutcome } from './meta/outcome';
import type { MetaStateMachine } from './meta/state-machine';
import type { MetaState } from './meta/state';
import type { MetaStore } from './meta/store';

/** Raft's typed errors as the catalog errors a client sees. */
export function raftErrorToKcm(err: unknown): unknown {
  if (err instanceof NotLeaderError) return KcmError.of('NO_LEADER', err.message, { cause: err });
  if (err instanceof ProposalOverloadedError) return KcmError.of('OVERLOADED', err.message, { cause: err });
  if (err instanceof ProposalDroppedError) return KcmError.of('NO_LEADER', `${err.message}; retry`, { cause: err });
  if (err instanceof TimeoutError) return KcmError.of('TIMEOUT', `${err.message}; the outcome is unknown, retry with the same request_id`, { cause: err });
  return err;
}

export class RaftMetaStore implements MetaStore {
  constructor(private readonly raft: RaftNode, private readonly sm: MetaStateMachine, private readonly timeoutMs = 10_000) {}

  state(): MetaState {
    return this.sm.state;
  }

  async propose(cmd: Command): Promise<ApplyOutcome> {
    try {
      return (await this.raft.propose(encodeCommand(cmd), { timeoutMs: this.timeoutMs })) as ApplyOutcome;
    } catch (err) {
      throw raftErrorToKcm(err);
    }
  }

  /**
   * ReadIndex barrier: after it resolves, state() reflects every write committed before the call.
   * The Raft core forgets a read round when leadership changes while it is in flight (the
   * round then only ends by timing out), so a leader change during the wait starts a fresh
   * round at once: reads are idempotent, and a member with no leader now fails fast.
   */
  async linearizableRead(): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      let onLeaderChange: () => void = () => {};
      const leaderChanged = new Promise<'leader changed'>((resolve) => {
        onLeaderChange = () => resolve('leader changed');
        this.raft.once('leaderChange', onLeaderChange);
      });
      const attempt = this.raft.read({ timeoutMs: Math.max(1, deadline - Date.now()) });
      try {
        if ((await Promise.race([attempt, leaderChanged])) !== 'leader changed') return;
        attempt.catch(() => {}); // abandoned: its timeout is nobody's error
      } catch (err) {
        throw raftErrorToKcm(err);
      } finally {
        this.raft.off('leaderChange', onLeaderChange);
      }
    }
  }
}

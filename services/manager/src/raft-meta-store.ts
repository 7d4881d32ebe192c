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

  /** ReadIndex barrier: after it resolves, state() reflects every write committed before the call. */
  async linearizableRead(): Promise<void> {
    try {
      await this.raft.read({ timeoutMs: this.timeoutMs });
    } catch (err) {
      throw raftErrorToKcm(err);
    }
  }
}

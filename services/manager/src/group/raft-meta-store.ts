// MetaStore on Raft: reads come from the local state machine, writes are proposed to the
// group and resolve with the apply outcome once committed and applied here. The commands
// proposed in one turn of the event loop share one log entry (a CommandBatch).

import { KcmError } from '@kcm/protocol';
import { NotLeaderError, ProposalDroppedError, ProposalOverloadedError, TimeoutError, type RaftNode } from '@kcm/raft';
import { encodeCommands, type Command } from '../meta/commands';
import type { ApplyOutcome } from '../meta/outcome';
import type { MetaStateMachine } from '../meta/state-machine';
import type { MetaState } from '../meta/state';
import type { MetaStore } from '../meta/store';
import { LEADER_CHANGED, LeaderChanges } from './leader-changes';

/** Raft's typed errors as the catalog errors a client sees. */
export function raftErrorToKcm(err: unknown): unknown {
  if (err instanceof NotLeaderError) return KcmError.of('NO_LEADER', err.message, { cause: err });
  if (err instanceof ProposalOverloadedError) return KcmError.of('OVERLOADED', err.message, { cause: err });
  if (err instanceof ProposalDroppedError) return KcmError.of('NO_LEADER', `${err.message}; retry`, { cause: err });
  if (err instanceof TimeoutError) return KcmError.of('TIMEOUT', `outcome unknown: ${err.message}; retry with the same request_id`, { cause: err });
  return err;
}

/** The same for a read barrier: a read changes nothing, so there is no outcome to be unknown. */
function readErrorToKcm(err: unknown): unknown {
  if (err instanceof TimeoutError) return KcmError.of('TIMEOUT', `${err.message}: no leader confirmed this member's read in time; retry`, { cause: err });
  return raftErrorToKcm(err);
}


/**
 * Most characters of JSON packed into one entry; a larger command gets an entry of its own.
 * Well under Raft's 1 MiB per append message, so a batch never needs a message alone.
 */
const MAX_BATCH_CHARS = 256 * 1024;

interface QueuedProposal {
  json: string;
  resolve(outcome: ApplyOutcome): void;
  reject(err: unknown): void;
}

export class RaftMetaStore implements MetaStore {
  /** Calls waiting for the next leader change (one listener on the node serves them all). */
  private readonly leaderChanges = new LeaderChanges();
  /** Commands proposed in this turn of the event loop, proposed together on the next. */
  private queued: QueuedProposal[] = [];

  /**
   * `admits` may refuse a command before it is proposed (the group's version gate,
   * protocol-gate.ts: a kind some member could not apply); its error is the proposal's.
   */
  constructor(
    private readonly raft: RaftNode,
    private readonly sm: MetaStateMachine,
    private readonly timeoutMs = 10_000,
    private readonly admits: (cmd: Command) => KcmError | undefined = () => undefined,
  ) {
    raft.on('leaderChange', () => this.leaderChanges.notify());
  }

  state(): MetaState {
    return this.sm.state;
  }

  /**
   * Resolves with the apply outcome once committed and applied here. If this member stops
   * leading while the proposal waits, the call fails at once with NO_LEADER (outcome
   * unknown: the entry may still commit; retry with the same request_id) instead of
   * waiting out the timeout: a leader that removed itself never hears of its pending
   * entries again.
   *
   * Commands proposed in the same turn go to Raft as one CommandBatch entry on the next
   * turn, in call order, each resolved with its own outcome: under load, an entry's cost on
   * every member (its LevelDB put, replication, proposal timer and bookkeeping) barely grows
   * with its size. Alone, a command is its own entry, as it always was.
   */
  propose(cmd: Command): Promise<ApplyOutcome> {
    const refusal = this.admits(cmd);
    if (refusal) return Promise.reject(refusal);
    return new Promise((resolve, reject) => {
      this.queued.push({ json: JSON.stringify(cmd), resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.proposeQueued());
    });
  }

  private proposeQueued(): void {
    const queued = this.queued;
    this.queued = [];
    let first = 0;
    let chars = 0;
    for (let i = 0; i < queued.length; i++) {
      chars += queued[i].json.length;
      const last = i === queued.length - 1;
      if (last || chars + queued[i + 1].json.length > MAX_BATCH_CHARS) {
        this.proposeBatch(queued.slice(first, i + 1));
        first = i + 1;
        chars = 0;
      }
    }
  }

  private proposeBatch(batch: QueuedProposal[]): void {
    // Alone, the entry's result is the command's outcome; a CommandBatch's is the array of them.
    const outcomeOf = (result: unknown, k: number) => (batch.length === 1 ? result : (result as unknown[])[k]) as ApplyOutcome;
    this.proposeEntry(encodeCommands(Date.now(), batch.map((q) => q.json))).then(
      (result) => batch.forEach((q, k) => q.resolve(outcomeOf(result, k))),
      (err: unknown) => batch.forEach((q) => q.reject(err)),
    );
  }

  /** One log entry: resolves with what its apply returned here (an outcome, or a batch's outcomes). */
  private async proposeEntry(data: Uint8Array): Promise<unknown> {
    const leaderChange = this.leaderChanges.next();
    const attempt = this.raft.propose(data, { timeoutMs: this.timeoutMs });
    try {
      const result = await Promise.race([attempt, leaderChange.changed]);
      if (result !== LEADER_CHANGED) return result;
      attempt.catch(() => {}); // abandoned: its late failure is nobody's error
      throw KcmError.of('NO_LEADER', 'outcome unknown: leadership moved while the command was pending; retry with the same request_id');
    } catch (err) {
      throw raftErrorToKcm(err);
    } finally {
      leaderChange.stop();
    }
  }

  /**
   * ReadIndex barrier: after it resolves, state() reflects every write committed before the call.
   * A round in flight when leadership changes is never answered (RaftNode then fails it with
   * NotLeaderError), so a leader change during the wait starts a fresh round at once instead:
   * reads are idempotent, and a member with no leader now fails fast.
   *
   * Right after an election the Raft core can know the new leader a moment before the
   * node has processed that news, and read() goes by the node's view: it refuses with "no
   * leader is known". Then the barrier waits for the node to announce the leader (within
   * its deadline) and reads again, instead of answering a client 503 that a retry a
   * millisecond later would not get.
   */
  async linearizableRead(): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const leaderChange = this.leaderChanges.next();
      const attempt = this.raft.read({ timeoutMs: Math.max(1, deadline - Date.now()) });
      try {
        if ((await Promise.race([attempt, leaderChange.changed])) !== LEADER_CHANGED) return;
        attempt.catch(() => {}); // abandoned: its timeout is nobody's error
      } catch (err) {
        if (!this.leaderNotAnnouncedYet(err) || !(await this.leaderChanges.within(deadline, leaderChange.changed))) throw readErrorToKcm(err);
      } finally {
        leaderChange.stop();
      }
    }
  }

  /** read() refused for want of a leader that the core already knows. */
  private leaderNotAnnouncedYet(err: unknown): boolean {
    return err instanceof NotLeaderError && err.leader === null && this.raft.status().leader !== null;
  }
}

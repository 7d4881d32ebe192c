// The job runner's commits (JobStarted, JobStepDone, JobProgress, JobFinished) wait a
// moment for the next job submission and go to Raft with it, so both share one round.
//
// Why: the Raft driver persists one batch at a time. A runner commit proposed alone takes
// a round of its own (leader fsync, replication, follower fsyncs), and a submission that
// arrives meanwhile waits for that round before its own starts: at one client, every
// acknowledged job then paid for about two rounds (its JobSubmitted, and the JobFinished of
// the job before it). Held until the next submission is proposed, both ride the same
// batch. When no submission comes, a held commit goes after `maxHoldMs` on its own.
//
// Nothing else changes: a held commit is proposed exactly as before, only later, and the
// runner still waits for it to be committed before running the next step.

import type { Command } from '../../meta/commands';
import type { ApplyOutcome } from '../../meta/outcome';
import type { MetaState } from '../../meta/state';
import type { MetaStore } from '../../meta/store';

export class CommitPacer {
  private held: (() => void)[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly store: MetaStore, private readonly maxHoldMs = 5) {}

  /** The store the runner commits through: proposals wait for the next submission (or maxHoldMs). */
  readonly runnerStore: MetaStore = {
    state: (): MetaState => this.store.state(),
    propose: async (cmd: Command): Promise<ApplyOutcome> => {
      await new Promise<void>((resolve) => {
        this.held.push(resolve);
        this.timer ??= setTimeout(() => this.release(), this.maxHoldMs);
      });
      return this.store.propose(cmd);
    },
  };

  /** The store submissions go through: each proposal takes the held runner commits along. */
  readonly submitterStore: MetaStore = {
    state: (): MetaState => this.store.state(),
    propose: (cmd: Command): Promise<ApplyOutcome> => {
      const proposal = this.store.propose(cmd);
      this.release();
      return proposal;
    },
  };

  /** Lets every held commit be proposed now (they follow in this same turn of the event loop). */
  release(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const held = this.held;
    this.held = [];
    for (const resolve of held) resolve();
  }
}

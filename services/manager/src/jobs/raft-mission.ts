// Job family: raft_mission — changes of the manager group's own membership.
// Membership lives in the Raft log: nobody edits a configuration file afterwards.

import { KcmError, type ParasOf, type RaftMissionResult } from '@kcm/protocol';
import { ProposalDroppedError, type RaftNode } from '@kcm/raft';
import { raftErrorToKcm } from '../group/raft-meta-store';
import type { JobOf, JobStep } from './framework/workflow';

export interface RaftMissionDeps {
  raft: RaftNode;
  /** How long a learner may take to catch up before add_peer fails. */
  catchUpTimeoutMs?: number;
  /** How long a transfer may take; the core itself aborts after an election timeout. */
  transferTimeoutMs?: number;
}

type Paras = ParasOf<'raft_mission'>;

/** Each task runs some of these steps (add_peer the first two, remove_peer and transfer_leader one each). */
interface Outputs {
  'add learner': { learner: string };
  'catch up and promote': { voter: string };
  'remove member': { removed: string };
  'transfer leadership': { leader: string };
}
type Step = JobStep<Paras, Outputs>;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });

export function raftMissionJob(deps: RaftMissionDeps): JobOf<'raft_mission', Outputs> {
  const conf = () => deps.raft.status().conf;
  const isVoter = (id: string) => conf().voters.includes(id);
  const isLearner = (id: string) => conf().learners.includes(id);

  async function changeConf(type: 'addLearner' | 'promote' | 'remove', node: string): Promise<void> {
    try {
      await deps.raft.proposeConfChange({ type, node }, { timeoutMs: 10_000 });
    } catch (err) {
      throw raftErrorToKcm(err);
    }
  }

  const isDropped = (err: unknown) => KcmError.is(err) && err.cause instanceof ProposalDroppedError;

  /**
   * Takes out a learner that add_peer added when the job fails: a learner that never
   * caught up must not stay in the group (get_meta_mode lists it, the leader keeps
   * replicating to it) until someone thinks of remove_peer. Returns what happened, for
   * the job's error. A lost leadership is thrown as is: the next leader resumes the step,
   * which fails there again and removes the learner then.
   */
  async function removeLearner(peer: string, signal: AbortSignal): Promise<string> {
    if (isVoter(peer)) return `${peer} became a voting member all the same (a proposal whose outcome was unknown committed); remove it with remove_peer if unwanted`;
    if (!isLearner(peer)) return `${peer} was not added as a learner`;
    for (let attempt = 1; isLearner(peer); attempt++) {
      try {
        await changeConf('remove', peer);
      } catch (err) {
        if (isDropped(err) && attempt < 5) {
          await sleep(200, signal);
          continue;
        }
        if (KcmError.is(err, 'NO_LEADER') && !isDropped(err)) throw err;
        return `removing the learner failed (${(err as Error).message}): remove it with remove_peer`;
      }
    }
    return `learner ${peer} was removed again`;
  }

  /** Runs an add_peer step; when it fails (other than by a lost leadership) the learner is removed and the error says so. */
  async function rollingBackLearner<T>(peer: string, signal: AbortSignal, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      // NO_LEADER (also a dropped proposal) hands the job to the next leader, as for any step.
      if (signal.aborted || KcmError.is(err, 'NO_LEADER')) throw err;
      const undone = await removeLearner(peer, signal);
      if (!KcmError.is(err)) throw err;
      throw KcmError.of(err.errorName, `${err.message}; ${undone}`, { cause: err, field: err.field });
    }
  }

  const addPeer = (peer: string): Step[] => [
    {
      name: 'add learner',
      async run(ctx) {
        // A proposal that timed out may still commit: the learner is removed whatever the outcome.
        if (!isVoter(peer) && !isLearner(peer)) await rollingBackLearner(peer, ctx.signal, () => changeConf('addLearner', peer));
        return { learner: peer };
      },
    },
    {
      name: 'catch up and promote',
      async run(ctx) {
        // Resumed after the learner was already removed (the leader died between the removal
        // and the job's end): promoting a non-member is not what was asked.
        if (!isVoter(peer) && !isLearner(peer)) {
          throw KcmError.of('CONFLICT', `paras.peer: ${peer} is no longer a learner: it was removed after it failed to catch up`, { field: 'paras.peer' });
        }
        const timeoutMs = deps.catchUpTimeoutMs ?? 60_000;
        const deadline = Date.now() + timeoutMs;
        return rollingBackLearner(peer, ctx.signal, async () => {
          // The core refuses promotion until the learner's log is close to the leader's.
          while (!isVoter(peer)) {
            if (Date.now() > deadline) throw KcmError.of('TIMEOUT', `learner ${peer} did not catch up within ${timeoutMs} ms; is it running?`);
            try {
              await changeConf('promote', peer);
            } catch (err) {
              if (!isDropped(err)) throw err;
              const progress = deps.raft.status().progress?.[peer];
              await ctx.progress(progress?.match ?? 0, deps.raft.status().lastIndex);
              await sleep(200, ctx.signal);
            }
          }
          return { voter: peer };
        });
      },
    },
  ];

  const removePeer = (peer: string): Step[] => [
    {
      name: 'remove member',
      async run() {
        // A leader that removes itself steps down after this applies; the job's next commit
        // then fails here and the new leader finds the member gone and finishes the job.
        if (isVoter(peer) || isLearner(peer)) await changeConf('remove', peer);
        return { removed: peer };
      },
    },
  ];

  const transferLeader = (target: string): Step[] => [
    {
      name: 'transfer leadership',
      async run(ctx) {
        const status = deps.raft.status();
        if (status.leader === target) return { leader: target };
        if (!isVoter(target)) throw KcmError.of(isLearner(target) ? 'CONFLICT' : 'NOT_FOUND', `paras.target_leader: ${target} is not a voting member (members: ${conf().voters.join(', ')})`, { field: 'paras.target_leader' });
        deps.raft.transferLeader(target);
        const deadline = Date.now() + (deps.transferTimeoutMs ?? 10_000);
        while (deps.raft.status().leader !== target) {
          if (Date.now() > deadline) throw KcmError.of('TIMEOUT', `leadership did not move to ${target} within ${deps.transferTimeoutMs ?? 10_000} ms`);
          await sleep(20, ctx.signal);
        }
        return { leader: target };
      },
    },
  ];

  return {
    jobType: 'raft_mission',
    validate(p) {
      if (p.task_type === 'transfer_leader' && !isVoter(p.target_leader!)) {
        throw KcmError.of(isLearner(p.target_leader!) ? 'CONFLICT' : 'NOT_FOUND', `paras.target_leader: ${p.target_leader} is not a voting member (members: ${conf().voters.join(', ')})`, { field: 'paras.target_leader' });
      }
      if (p.task_type === 'remove_peer' && !isVoter(p.peer!) && !isLearner(p.peer!)) {
        throw KcmError.of('NOT_FOUND', `paras.peer: ${p.peer} is not a member (members: ${conf().voters.join(', ')})`, { field: 'paras.peer' });
      }
      if (p.task_type === 'remove_peer' && conf().voters.length === 1 && isVoter(p.peer!)) {
        throw KcmError.of('CONFLICT', `paras.peer: ${p.peer} is the only voting member; add another member first`, { field: 'paras.peer' });
      }
    },
    // Membership changes go one at a time.
    lockKey: () => 'raft_mission',
    steps(p) {
      switch (p.task_type) {
        case 'add_peer':
          return addPeer(p.peer!);
        case 'remove_peer':
          return removePeer(p.peer!);
        case 'transfer_leader':
          return transferLeader(p.target_leader!);
      }
    },
    // Only the steps of the job's task ran; the others' outputs are absent.
    result: (outputs) => ({ ...outputs['add learner'], ...outputs['catch up and promote'], ...outputs['remove member'], ...outputs['transfer leadership'] }),
  };
}

// Job family: raft_mission — changes of the manager group's own membership.
// Membership lives in the Raft log: nobody edits a configuration file afterwards.

import { KcmError, type ParasOf } from '@kcm/protocol';
import { ProposalDroppedError, type RaftNode } from '@kcm/raft';
import { raftErrorToKcm } from '../raft-meta-store';
import type { JobDefinition, StepContext } from './workflow';

export interface RaftMissionDeps {
  raft: RaftNode;
  /** How long a learner may take to catch up before add_peer fails. */
  catchUpTimeoutMs?: number;
  /** How long a transfer may take; the core itself aborts after an election timeout. */
  transferTimeoutMs?: number;
}

type Paras = ParasOf<'raft_mission'>;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });

export function raftMissionJob(deps: RaftMissionDeps): JobDefinition<Paras> {
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

  const addPeer = (peer: string) => [
    {
      name: 'add learner',
      async run() {
        if (!isVoter(peer) && !isLearner(peer)) await changeConf('addLearner', peer);
        return { learner: peer };
      },
    },
    {
      name: 'catch up and promote',
      async run(ctx: StepContext<Paras>) {
        const deadline = Date.now() + (deps.catchUpTimeoutMs ?? 60_000);
        // The core refuses promotion until the learner's log is close to the leader's.
        while (!isVoter(peer)) {
          if (Date.now() > deadline) throw KcmError.of('TIMEOUT', `learner ${peer} did not catch up within ${deps.catchUpTimeoutMs ?? 60_000} ms; is it running?`);
          try {
            await changeConf('promote', peer);
          } catch (err) {
            if (!(KcmError.is(err) && (err.cause instanceof ProposalDroppedError))) throw err;
            const progress = deps.raft.status().progress?.[peer];
            await ctx.progress(progress?.match ?? 0, deps.raft.status().lastIndex);
            await sleep(200, ctx.signal);
          }
        }
        return { voter: peer };
      },
    },
  ];

  const removePeer = (peer: string) => [
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

  const transferLeader = (target: string) => [
    {
      name: 'transfer leadership',
      async run(ctx: StepContext<Paras>) {
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
    result: (outputs) => Object.assign({}, ...Object.values(outputs).map((o) => (o ?? {}) as object)),
  };
}

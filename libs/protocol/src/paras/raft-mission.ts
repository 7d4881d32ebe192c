/** Membership changes of the manager's own Raft group (spec 2.8, 4.7). */
import { z } from 'zod';
import { enumString, peerString } from '../formats';

export const RAFT_TASK_TYPES = ['transfer_leader', 'add_peer', 'remove_peer'] as const;

export const raftMissionParas = z
  .object({
    task_type: enumString(RAFT_TASK_TYPES),
    target_leader: peerString().optional(),
    peer: peerString().optional(),
  })
  .superRefine((p, ctx) => {
    if (p.task_type === 'transfer_leader' && p.target_leader === undefined) {
      ctx.addIssue({ code: 'custom', message: 'is required when task_type is transfer_leader', path: ['target_leader'] });
    }
    if ((p.task_type === 'add_peer' || p.task_type === 'remove_peer') && p.peer === undefined) {
      ctx.addIssue({ code: 'custom', message: `is required when task_type is ${p.task_type}`, path: ['peer'] });
    }
  });

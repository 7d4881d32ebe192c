// The order in which a driver handles one Ready, decided in one place: the production
// driver (node.ts) and the simulator's node (test/sim/sim-node.ts) both follow this plan,
// so the seeded soak exercises the order that runs in production and cannot drift from it.
//
// A pass over one Ready:
//   1. send `sendBeforeWrite`         (a leader's App and Heartbeat)
//   2. start `write`, synced          (absent when nothing must be synced)
//   3. if `applyDuringWrite`: apply the committed entries while the write is in flight
//   4. wait until the write is durable
//   5. send `sendAfterWrite`          (everything else)
//   6. restore the snapshot; apply the committed entries unless step 3 did
//   7. advance(ready), then take the next Ready
// One pass at a time: whatever the core steps while the write is in flight leaves in the
// next Ready, taken after step 4.
//
// Why each step may go where it goes:
// - App and Heartbeat leave before the write (Raft thesis 10.2.1; etcd: "the leader can
//   write to its disk in parallel with replicating to the followers"). Only a leader
//   sends them and they promise nothing about its own disk. Its core counts its own copy
//   of the new entries towards commit at once, but a commit index that counts it can only
//   leave this node (in a message, or as an applied entry) in a later Ready, taken after
//   this write is durable. A crash inside the window loses entries that followers may
//   already hold: nothing counted on them, and a follower holding them is merely ahead.
// - Every other message waits for the write: votes and their requests, append and
//   heartbeat acks, snapshots, TimeoutNow and reads may promise state a crash must not
//   lose (a vote given twice in one term elects two leaders; an ack for an entry that is
//   then lost lets a commit stand on a copy that is gone).
// - Committed entries that an earlier Ready wrote are durable here and on a quorum, so
//   they are applied while this Ready's entries are being synced: their callers do not
//   wait for an fsync that is not theirs. Committed entries in this very Ready (a
//   one-member group commits on its own append) and a snapshot wait for the write.
// - A Ready that only moves the commit index is not written on its own: its hard state
//   rides with the next write. The commit index promises nothing to anyone and is
//   relearned from the leader after a restart (the core starts at max(snapshot index,
//   stored commit)). etcd does the same: a commit-only HardState waits in its WAL
//   encoder's buffer for the next synced record.

import type { PersistUpdate } from './storage';
import type { HardState, Message, Ready } from './types';

export interface ReadyPlan {
  sendBeforeWrite: Message[];
  sendAfterWrite: Message[];
  /** The one synced write of this pass; undefined when the Ready need not be synced. */
  write: PersistUpdate | undefined;
  /** Apply ready.committedEntries while the write is in flight (else after it and the snapshot). */
  applyDuringWrite: boolean;
  /** The commit-only hard state still waiting for a write, to pass to the next planReady. */
  unwrittenHardState: HardState | undefined;
}

/** Messages a leader may send before its own write of the same Ready is durable. */
export function mayLeaveBeforeWrite(m: Message): boolean {
  return m.type === 'App' || m.type === 'Heartbeat';
}

/** Plans one pass over `rd`; `unwrittenHardState` is what the previous plan left unwritten. */
export function planReady(rd: Ready, unwrittenHardState: HardState | undefined): ReadyPlan {
  const sendBeforeWrite: Message[] = [];
  const sendAfterWrite: Message[] = [];
  for (const m of rd.messages) (mayLeaveBeforeWrite(m) ? sendBeforeWrite : sendAfterWrite).push(m);

  let write: PersistUpdate | undefined;
  if (rd.mustSync) {
    write = { hardState: rd.hardState ?? unwrittenHardState, entries: rd.entries, snapshot: rd.snapshot };
    unwrittenHardState = undefined;
  } else if (rd.hardState) {
    unwrittenHardState = rd.hardState;
  }

  const committed = rd.committedEntries;
  const applyDuringWrite =
    !rd.snapshot && (rd.entries.length === 0 || committed.length === 0 || committed[committed.length - 1].index < rd.entries[0].index);

  return { sendBeforeWrite, sendAfterWrite, write, applyDuringWrite, unwrittenHardState };
}

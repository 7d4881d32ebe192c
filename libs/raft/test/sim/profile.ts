// Per-run variety: each seed draws its own Raft settings, client mix and fault flavour,
// so the seeds together cover configurations a single fixed setup would never reach
// (one entry per App message, a window of one, check-quorum or pre-vote off, storms of
// crashes or elections). All are valid configurations: safety must hold in every one.
// The planted-bug hunts (mutants.ts) use these same flavours.

import type { ClientOptions } from './client';
import { defaultWeights, type FaultOptions } from './faults';
import type { Prng } from './prng';
import type { NodeTuning } from './sim-node';

export interface RunProfile {
  flavour: FlavourName;
  tuning: NodeTuning;
  faults: Partial<FaultOptions>;
  clients: Partial<ClientOptions>;
}

export type FlavourName = 'mixed' | 'crash-heavy' | 'partition-heavy' | 'election-storm';

export interface Flavour {
  tuning?: Partial<NodeTuning>;
  faults?: Partial<FaultOptions>;
  clients?: Partial<ClientOptions>;
}

export const flavours: Record<FlavourName, Flavour> = {
  mixed: {},
  /** Leaders die soon after election and voters reboot: where persistence and figure 8 matter. */
  'crash-heavy': {
    faults: { weights: { ...defaultWeights, crash: 5, pause: 2 }, killNewLeaderRate: 0.4, rebootVoterRate: 0.3 },
  },
  /** Leaders cut off or paused while many clients hit few keys: where stale reads would show. */
  'partition-heavy': {
    faults: { weights: { partition: 1, 'isolate-leader': 3, 'one-way': 0, crash: 1, pause: 2, weather: 1 } },
    clients: { clients: 8, keys: ['a', 'b', 'c'], reconnectRate: 0.3 },
  },
  /** Contested elections: no pre-vote, slow links, voters rebooting right after voting. */
  'election-storm': {
    tuning: { preVote: false },
    faults: { rebootVoterRate: 0.5, killNewLeaderRate: 0.1, maxDelay: 8 },
  },
};

export function drawRunProfile(rng: Prng): RunProfile {
  const tuning: NodeTuning = {
    electionTick: 10,
    heartbeatTick: rng.pick([1, 2]),
    // Small messages and windows make the leader send the log in pieces, which opens
    // the interleavings of the paper's figure 8; 1 byte means one entry per message.
    maxSizePerMsg: rng.pick([1, 400, 64 * 1024]),
    maxInflightMsgs: rng.pick([1, 4, 64]),
    compactEvery: rng.pick([20, 50, 1000]),
    preVote: rng.chance(0.7),
    checkQuorum: rng.chance(0.7),
    lazyCommitBroadcast: rng.chance(0.7),
    // How long a synced write stays in flight: 0 keeps every window to the crash points
    // only; 1-2 ticks let messages, ticks and proposals reach the core during the write.
    maxWriteTicks: rng.pick([0, 1, 2]),
  };
  const faults: Partial<FaultOptions> = {
    faultRate: rng.pick([0.01, 0.02, 0.03]),
    maxDelay: rng.pick([2, 4, 8]),
  };
  const flavour = rng.pick(Object.keys(flavours).sort() as FlavourName[]);
  const f = flavours[flavour];
  return {
    flavour,
    tuning: { ...tuning, ...f.tuning },
    faults: { ...faults, ...f.faults },
    clients: { ...f.clients },
  };
}

// Per-run variety: each seed draws its own Raft settings and fault mix, so the seeds
// together cover configurations a single fixed setup would never reach (one entry per
// App message, a window of one, check-quorum or pre-vote off, crash-heavy schedules).
// All of them are valid configurations: safety must hold in every one.

import { defaultWeights, type FaultOptions } from './faults';
import type { Prng } from './prng';
import type { NodeTuning } from './sim-node';

export interface RunProfile {
  tuning: NodeTuning;
  faults: Partial<FaultOptions>;
}

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
  };
  const crashHeavy = rng.chance(0.3);
  const faults: Partial<FaultOptions> = {
    faultRate: rng.pick([0.01, 0.02, 0.03]),
    weights: crashHeavy ? { ...defaultWeights, crash: 5, pause: 2 } : defaultWeights,
    killNewLeaderRate: crashHeavy ? 0.4 : 0.05,
    rebootVoterRate: crashHeavy ? 0.3 : 0.02,
    maxDelay: rng.pick([2, 4, 8]),
  };
  return { tuning, faults };
}

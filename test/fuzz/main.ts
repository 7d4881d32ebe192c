// npm run fuzz:emit [-- --cases 100000 --seed 1]: the fuzzer (emit-fuzz.ts) against a real
// 3-manager group holding machines, a cluster and jobs (see emit-fuzz.ts); prints the
// figures and exits 1 unless every count that must be 0 is.
// Run it under the system tests' lock: flock /tmp/kcm-system.lock npm run fuzz:emit

import { parseArgs } from 'node:util';
import { runFuzz, startFuzzGroup } from './emit-fuzz';

const { values } = parseArgs({ options: { cases: { type: 'string', default: '100000' }, seed: { type: 'string', default: '1' } } });
const group = await startFuzzGroup();
let exitCode = 1;
try {
  const figures = await runFuzz(group, { cases: Number(values.cases), seed: Number(values.seed), log: (line) => process.stdout.write(`${line}\n`) });
  process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
  const bad = figures.processExits + figures.replies5xx + figures.repliesWithoutEnvelope + figures.unaccountedStateChanges;
  process.stdout.write(
    `\nfuzz:emit seed ${values.seed}: ${figures.cases} cases in ${figures.seconds.toFixed(0)} s; process exits ${figures.processExits}, 5xx replies ${figures.replies5xx}, ` +
      `replies without the envelope ${figures.repliesWithoutEnvelope}, state changes by rejected requests ${figures.unaccountedStateChanges} (accepted jobs ${figures.accepted}: ${JSON.stringify(figures.acceptedEnded)}; ` +
      `least state at a batch's start ${JSON.stringify(figures.leastState)}, rebuilt ${figures.rebuilt} times)\n`,
  );
  exitCode = bad === 0 ? 0 : 1;
} finally {
  await group.stop();
}
process.exit(exitCode);

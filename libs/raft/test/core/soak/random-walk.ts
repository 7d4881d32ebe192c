// Many seeds of the core's random walk. Run: npx tsx libs/raft/test/core/soak/random-walk.ts [from] [to] [steps]

import { randomWalk } from '../randomized';

const from = Number(process.argv[2] ?? 1);
const to = Number(process.argv[3] ?? 200);
const steps = Number(process.argv[4] ?? 3000);
let failed = 0;
for (let seed = from; seed <= to; seed++) {
  try {
    const r = randomWalk(seed, steps);
    if (r.violations.length > 0) {
      failed++;
      console.log(`seed ${seed}: ${r.violations.slice(0, 5).join('; ')}`);
    }
  } catch (e) {
    failed++;
    console.log(`seed ${seed}: threw ${(e as Error).stack}`);
  }
}
console.log(`${to - from + 1} seeds, ${failed} failed`);
process.exitCode = failed > 0 ? 1 : 0;

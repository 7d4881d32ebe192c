// npm run soak:raft [-- --kills 200 --seed N]
//
// The kill scenario of test/raft-kv/kill.test.ts at soak length: three raft-kv member
// processes, a random member SIGKILLed and restarted 200 times under continuous writes.
// Prints every kill and the final report; exits non-zero on any violation.

import { parseArgs } from 'node:util';
import { formatKillReport, runKillScenario } from '../../../../bench/raft-kv/kill-scenario';

const { values: flags } = parseArgs({
  options: {
    kills: { type: 'string', default: '200' },
    seed: { type: 'string' },
  },
});

const report = await runKillScenario({
  kills: Number(flags.kills),
  hosts: ['127.0.9.21', '127.0.9.22', '127.0.9.23'],
  raftPort: 7421,
  kvPort: 7422,
  seed: flags.seed === undefined ? undefined : Number(flags.seed),
  log: (line) => console.log(line),
});
console.log(`\n${formatKillReport(report)}`);

const failures = [
  ...report.lostWrites.map((w) => `lost acknowledged write ${w}`),
  ...report.termViolations,
  ...report.voteViolations,
  ...(report.linearizability === 'ok' ? [] : [`linearizability: ${report.linearizabilityReport}`]),
  ...(report.failoverP99 <= 2_000 ? [] : [`failover p99 ${report.failoverP99.toFixed(0)} ms > 2000 ms`]),
];
if (failures.length > 0) {
  console.error(`\nFAILED (${failures.length}):\n${failures.join('\n')}`);
  process.exit(1);
}
console.log('\nsoak passed');
process.exit(0);

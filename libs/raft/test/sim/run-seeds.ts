// Soak runner: many seeds from the command line, a one-line summary, and the failing
// seeds with their trace tails.
//
//   npx tsx libs/raft/test/sim/run-seeds.ts --seeds 5000 [--from 1] [--nodes 3|5] [--ticks 2000]
//        [--mutant <name>]    (run a planted bug instead of the real core; see mutants.ts)
//        [--no-commit-rule]   (leave only the paper's four safety properties to the checker)
//
// Exit code 1 if any seed failed (for the real core) or none did (for a mutant).

import { planReady } from '../../src/core/driver-order';
import { RawNode } from '../../src/core/raw-node';
import { loadMutant, plantedBugs, removeMutants, type MutantCore } from './mutants';
import { formatFailure, formatSummary, runSeeds } from './seed-runner';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

async function main(): Promise<void> {
  const seeds = Number(flag('seeds', '100'));
  const from = Number(flag('from', '1'));
  const nodes = Number(flag('nodes', '3'));
  const ticks = Number(flag('ticks', '2000'));
  const mutantName = flag('mutant', '');
  let core: MutantCore = { RawNode, planReady };
  let extra: { nodes?: number } = {};
  if (mutantName) {
    const m = plantedBugs.find((b) => b.name === mutantName);
    if (!m) throw new Error(`unknown mutant ${mutantName}; known: ${plantedBugs.map((b) => b.name).join(', ')}`);
    core = await loadMutant(m);
    extra = m.hunt;
  }
  const checkCommitRule = !process.argv.includes('--no-commit-rule');
  const summary = runSeeds({ ...core, firstSeed: from, count: seeds, nodes, ticks, checkCommitRule, ...extra });
  if (mutantName) removeMutants();
  for (const f of summary.failures.slice(0, 3)) console.log(`${formatFailure(f)}\n`);
  if (summary.failures.length > 3) console.log(`... and ${summary.failures.length - 3} more failing seeds: ${summary.failures.map((f) => f.seed).join(' ')}`);
  if (summary.lincheckUnknown.length > 0) console.log(`linearizability check ran out of time on seeds: ${summary.lincheckUnknown.join(' ')}`);
  console.log(formatSummary(`${mutantName || 'core'} nodes=${extra.nodes ?? nodes} ticks=${ticks} seeds ${from}..${from + seeds - 1}`, summary));
  const failed = mutantName ? summary.failures.length === 0 : summary.failures.length > 0;
  process.exitCode = failed ? 1 : 0;
}

await main();

// Planted bugs: textual mutations of a copy of the core (driver-order.ts included, so a
// mistake in the production driver's order is planted the same way), to prove the
// simulator's checkers catch real Raft mistakes. Each mutant is the core's source copied into
// .mutants/<name>/ (gitignored) with one exact piece of text replaced, then imported
// dynamically. If the text is not found exactly once, loading fails loudly: a mutation
// that silently stopped applying would make its test pass for nothing.

import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { SimOptions } from './cluster';
import { flavours } from './profile';
import type { PlanReady, RawNodeClass } from './sim-node';

const simDir = dirname(fileURLToPath(import.meta.url));
const coreDir = join(simDir, '..', '..', 'src', 'core');
export const mutantsDir = join(simDir, '.mutants');

export interface Mutation {
  name: string;
  /** What the bug breaks, in the paper's words. */
  breaks: string;
  /** File under src/core/. */
  file: string;
  find: string;
  replace: string;
  /**
   * How the simulator hunts it: a cluster size and one of the fault flavours the
   * default runs also draw (profile.ts), the one that exercises the broken rule most.
   */
  hunt: Pick<SimOptions, 'nodes' | 'tuning' | 'faults' | 'clients'>;
}

const readHunt: Mutation['hunt'] = { nodes: 3, ...flavours['partition-heavy'] };
const electionHunt: Mutation['hunt'] = { nodes: 5, ...flavours['election-storm'] };
const crashHunt: Mutation['hunt'] = { nodes: 3, ...flavours['crash-heavy'] };

export const plantedBugs: Mutation[] = [
  {
    name: 'commit-old-term-by-counting',
    breaks: 'section 5.4.2 / figure 8: a leader may only count replicas for entries of its own term',
    file: 'step-leader.ts',
    find: 'if (index <= r.log.committed || r.log.termOrZero(index) !== r.term) return false;',
    replace: 'if (index <= r.log.committed) return false;',
    hunt: { nodes: 3 },
  },
  {
    name: 'read-index-without-quorum',
    breaks: 'thesis 6.4: a leader must confirm it is still leader (heartbeat quorum) before serving a read',
    file: 'step-leader.ts',
    find: 'if (r.tracker.conf.voters.length === 1 && r.tracker.isVoter(r.id)) {',
    replace: 'if (r.tracker.isVoter(r.id)) {',
    hunt: readHunt,
  },
  {
    name: 'vote-without-log-check',
    breaks: 'section 5.4.1: a vote goes only to a candidate whose log is at least as up-to-date',
    file: 'raft.ts',
    find: 'if (canVote && this.log.isUpToDate(m.index ?? 0, m.logTerm ?? 0)) {',
    replace: 'if (canVote) {',
    hunt: { nodes: 3 },
  },
  {
    // The vote never survives a restart, as if it had not been persisted. (Dropping it
    // from the Ready instead makes this core livelock: hasReady compares live fields.)
    name: 'vote-not-persisted',
    breaks: 'figure 2: votedFor is persistent state; a restarted node must not vote twice in one term',
    file: 'raft.ts',
    find: 'this.vote = hardState.vote;',
    replace: 'this.vote = null;',
    hunt: electionHunt,
  },
  {
    // The driver's order, not the core: a follower's ack leaves before its fsync. Caught
    // only because the simulator drives planReady and crashes inside the write's window.
    name: 'ack-before-fsync',
    breaks: 'figure 2: a follower acknowledges AppendEntries only once the entries are on stable storage',
    file: 'driver-order.ts',
    find: "return m.type === 'App' || m.type === 'Heartbeat';",
    replace: "return m.type === 'App' || m.type === 'Heartbeat' || m.type === 'AppResp';",
    hunt: crashHunt,
  },
  {
    name: 'vote-before-fsync',
    breaks: 'figure 2: votedFor is on stable storage before the vote is granted',
    file: 'driver-order.ts',
    find: "return m.type === 'App' || m.type === 'Heartbeat';",
    replace: "return m.type === 'App' || m.type === 'Heartbeat' || m.type === 'VoteResp';",
    hunt: electionHunt,
  },
];

/** A core under test: the RawNode class and the driver-order plan that go with it. */
export interface MutantCore {
  RawNode: RawNodeClass;
  planReady: PlanReady;
}

/**
 * Writes the mutated copy of the core and imports its RawNode and planReady. The copy's errors.ts
 * re-exports the real one: the real MemoryStorage throws the real error classes, and
 * the core catches them with instanceof.
 */
export async function loadMutant(m: Mutation): Promise<MutantCore> {
  const dir = join(mutantsDir, m.name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(coreDir)) {
    if (f.endsWith('.ts')) cpSync(join(coreDir, f), join(dir, f));
  }
  writeFileSync(
    join(dir, 'errors.ts'),
    "// Generated: the mutant shares the real error classes (see mutants.ts).\nexport * from '../../../../src/core/errors';\n",
  );
  const path = join(dir, m.file);
  const source = readFileSync(path, 'utf8');
  const found = source.split(m.find).length - 1;
  if (found !== 1) {
    throw new Error(
      `mutation ${m.name}: expected the target text exactly once in src/core/${m.file}, found it ${found} times. ` +
        `The core changed: update the mutation. Target: ${JSON.stringify(m.find)}`,
    );
  }
  writeFileSync(path, source.replace(m.find, m.replace));
  const mod = (await import(pathToFileURL(join(dir, 'raw-node.ts')).href)) as { RawNode?: RawNodeClass };
  if (typeof mod.RawNode !== 'function') throw new Error(`mutant ${m.name} does not export RawNode`);
  const order = (await import(pathToFileURL(join(dir, 'driver-order.ts')).href)) as { planReady?: PlanReady };
  if (typeof order.planReady !== 'function') throw new Error(`mutant ${m.name} does not export planReady`);
  return { RawNode: mod.RawNode, planReady: order.planReady };
}

export function removeMutants(): void {
  rmSync(mutantsDir, { recursive: true, force: true });
}

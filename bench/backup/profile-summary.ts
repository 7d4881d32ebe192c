// npx tsx bench/backup/profile-summary.ts <file.cpuprofile> [fromUs toUs] [top]
//
// Where a V8 CPU profile (node --cpu-prof; bench:backup --cpu-prof DIR) spent its samples,
// optionally only those between two instants of the monotonic clock (µs, as bench:backup
// prints for the backup job): self time per function, and per function with its callers'
// time (total), so an agent's CPU per GB can be split into TLS, pipe reads, hashing, logging...

import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [file, fromArg, toArg, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-summary.ts <file.cpuprofile> [fromUs toUs] [top]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const from = fromArg ? Number(fromArg) : -Infinity;
const to = toArg ? Number(toArg) : Infinity;
const top = topArg ? Number(topArg) : 40;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const label = (n: ProfileNode) => {
  const url = n.callFrame.url.replace(/^file:\/\/.*?\/(node_modules|services|libs)\//, '$1/');
  return `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
};

const self = new Map<string, number>();
const total = new Map<string, number>();
let at = profile.startTime;
let windowUs = 0;
let idleUs = 0;
for (let i = 0; i < profile.samples.length; i++) {
  at += profile.timeDeltas[i];
  const dt = profile.timeDeltas[i + 1] ?? 0; // a sample stands for the time until the next one
  if (at < from || at > to) continue;
  const leaf = byId.get(profile.samples[i])!;
  windowUs += dt;
  if (leaf.callFrame.functionName === '(idle)') {
    idleUs += dt;
    continue;
  }
  self.set(label(leaf), (self.get(label(leaf)) ?? 0) + dt);
  const seen = new Set<string>();
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
    const l = label(byId.get(id)!);
    if (seen.has(l)) continue;
    seen.add(l);
    total.set(l, (total.get(l) ?? 0) + dt);
  }
}
const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
process.stdout.write(`${file}: ${ms(windowUs)} ms sampled in the window, ${ms(idleUs)} ms idle, ${ms(windowUs - idleUs)} ms busy (main thread)\n`);
process.stdout.write(`\nself time:\n`);
for (const [l, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${ms(us)} ms  ${l}\n`);
process.stdout.write(`\ntotal time (with callees):\n`);
for (const [l, us] of [...total].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${ms(us)} ms  ${l}\n`);

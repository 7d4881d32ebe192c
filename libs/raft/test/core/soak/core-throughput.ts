// Throughput of the pure core alone: 3 RawNodes over MemoryStorage, messages passed in
// process, the leader proposing `batch` 100-byte entries per Ready cycle. Prints entries
// committed per second. Run: npx tsx libs/raft/test/core/soak/core-throughput.ts [seconds] [batch]

import { RawNode } from '../../../src/core/raw-node';
import { MemoryStorage } from '../../../src/core/storage';
import type { Message } from '../../../src/core/types';

const seconds = Number(process.argv[2] ?? 3);
const batch = Number(process.argv[3] ?? 64);
const ids = ['a', 'b', 'c'];
const storages = new Map(ids.map((id) => [id, MemoryStorage.bootstrap(ids)]));
let seed = 1;
const nodes = new Map(
  ids.map((id) => [id, new RawNode({ id, electionTick: 10, heartbeatTick: 1, random: () => (seed++ % 7) / 7 }, storages.get(id)!)]),
);
let queue: Message[] = [];
let applied = 0;

function cycle(): void {
  for (const [id, n] of nodes) {
    if (!n.hasReady()) continue;
    const rd = n.ready();
    storages.get(id)!.persistNow({ hardState: rd.hardState, entries: rd.entries, snapshot: rd.snapshot });
    for (const m of rd.messages) queue.push(m);
    if (id === 'a') applied += rd.committedEntries.length;
    n.advance(rd);
  }
  const msgs = queue;
  queue = [];
  for (const m of msgs) nodes.get(m.to)!.step(m);
}

nodes.get('a')!.campaign();
for (let i = 0; i < 10; i++) cycle();
if (nodes.get('a')!.status().role !== 'leader') throw new Error('no leader');

const payload = new Uint8Array(100);
const start = performance.now();
let proposed = 0;
let cycles = 0;
while (performance.now() - start < seconds * 1000) {
  for (let i = 0; i < batch; i++) nodes.get('a')!.propose(payload);
  proposed += batch;
  cycle();
  cycles++;
  if (cycles % 50 === 0) nodes.get('a')!.tick();
}
for (let i = 0; i < 10; i++) cycle();
const elapsed = (performance.now() - start) / 1000;
console.log(`proposed ${proposed}, applied on leader ${applied}, ${Math.round(applied / elapsed)} entries/s (batch ${batch}, ${cycles} cycles)`);

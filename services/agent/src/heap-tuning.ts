// How the agent's V8 heap grows: set once at start (main.ts), before any transfer.
//
// An agent's live heap is small (about 20 MB), and V8 set its next full-collection limit only
// about 10 MB above it (--trace-incremental-marking: size/limit 20/30 MB). Every byte a
// backup, rebuild or restore moves passes the agent as Buffers (pipe reads, TLS records),
// memory outside the heap that V8 counts toward that limit. During a transfer the agents
// ran a mark-compact of their whole heap about every 100 ms, each freeing about 1 MB of heap
// objects: perf put 40% of each agent's CPU per backup in them (bench:backup --source-apart).
// A growth factor of 4 (limit = 4 x what survived, about 80 MB here) leaves 60 MB of room:
// the mark-compacts during a backup fall from about 14 per agent to none, and each agent's
// CPU per backed-up GB about halves (bench/backup/README.md, "Session 15"). The cost is at
// most that much more memory per agent between collections.

import v8 from 'node:v8';

/** The heap's limit after a full collection is (1 + this / 100) x what survived it. */
export const AGENT_HEAP_GROWING_PERCENT = 300;

export function tuneHeapForTransfers(): void {
  v8.setFlagsFromString(`--heap-growing-percent=${AGENT_HEAP_GROWING_PERCENT}`);
}

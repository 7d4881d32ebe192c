// npm run bench:scale:meta [-- --hosts 1000 --clusters 1000 --jobs 100000]
//
// The manager's replicated state at fleet scale, in one process, without Raft or agents:
// what a snapshot of it costs. The state is loaded through the FSM's own apply
// (applyCommand) with commands built here, not through jobs: loadFleetStateDirectly is a
// BENCH-ONLY fast path (no job ran, no agent was asked), for measuring the state alone.
//
// Prints: image size; the event-loop block of a snapshot as one JSON image (how it was)
// and as pieces (snapshotMetaChunks: the longest piece is the block now); restoring an
// image (a restart or a follower's catch-up); the heap the state takes.

import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { applyCommand, CommandKind, emptyMetaState, restoreMetaInPieces, snapshotMeta, snapshotMetaChunks, type ClusterOptions, type Command, type MetaState } from '@kcm/manager';
import { storedAccount } from '../../test/helpers/secrets';
import { hollowHosts } from './hollow-agents';

const AT = 1_700_000_000_000;
const options: ClusterOptions = {
  haMode: 'rbr', maxStorageSizeGb: 10, maxConnections: 100, cpuCores: 1, cpuLimitNode: 'quota',
  innodbSizeMb: 128, rocksdbBlockCacheSizeMb: 0, dbcfg: 1, fullsyncLevel: 1,
};

function must(s: MetaState, cmd: Command): unknown {
  const outcome = applyCommand(s, cmd);
  if (!outcome.ok) throw new Error(`bench load refused: ${JSON.stringify(outcome)}`);
  return outcome.value;
}

/** BENCH-ONLY: builds the state of `hosts` machines, `clusters` clusters (3 shards x 3 nodes + 2 compute nodes) and `jobs` kept jobs. */
export function loadFleetStateDirectly(hostCount: number, clusterCount: number, jobCount: number, firstHost = '127.50.0.1'): MetaState {
  const s = emptyMetaState();
  const hosts = hollowHosts(firstHost, hostCount);
  for (const hostaddr of hosts) {
    for (const [machineType, portLow, portHigh] of [['storage', 5000, 5199], ['computer', 6000, 6099]] as const) {
      must(s, {
        kind: CommandKind.MachineRegistered, at: AT, hostaddr, machineType, portLow, portHigh, rackId: 'r1',
        datadir: '/kcm/data', logdir: '/kcm/log', walLogDir: '/kcm/wal', compDatadir: '/kcm/comp', totalMemMb: 65_536, totalCpuCores: 16,
        facts: { cores: 16, memoryMb: 65_536, freeDiskBytes: { '/kcm/data': 1024 ** 4 }, mariadbInstalled: true, postgresInstalled: true },
      } as Command);
    }
  }
  const accounts = {
    admin: storedAccount({ user: 'kcm_admin', password: 'admin-secret' }),
    replication: storedAccount({ user: 'kcm_repl', password: 'repl-secret' }),
    storage: storedAccount({ user: 'storage', password: 'storage-secret' }),
    computer: storedAccount({ user: 'computer', password: 'computer-secret' }),
  };
  let next = 0;
  const host = () => hosts[next++ % hosts.length];
  for (let c = 0; c < clusterCount; c++) {
    const newShards = [0, 1, 2].map(() => ({ hosts: [host(), host(), host()] }));
    must(s, {
      kind: CommandKind.ClusterCreated, at: AT, jobId: `load-${c}`, nickName: `cluster${c}`, options, accounts,
      placement: { newShards, newNodes: [], newComps: [host(), host()] },
    } as Command);
  }
  for (let j = 0; j < jobCount; j++) {
    const submitted = must(s, {
      kind: CommandKind.JobSubmitted, at: AT + j, jobType: 'get_cluster_summary', sentJobType: 'get_cluster_summary',
      paras: { cluster_id: String(j % Math.max(1, clusterCount)), note: 'a kept job of about the size of a real one' },
      requestId: null, lockKey: null, stepNames: ['answer'],
    } as Command) as { jobId: string };
    const jobId = submitted.jobId;
    must(s, { kind: CommandKind.JobFinished, at: AT + j, jobId, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: { rows: 1 } }, keepFinished: jobCount } as Command);
  }
  return s;
}

function ms(t0: number): number {
  return performance.now() - t0;
}

/** Drives a piecewise producer one piece per event-loop turn, as the member does, timing each piece. */
async function timePieces<T>(it: Iterator<T, unknown>, onPiece?: (piece: T) => void): Promise<{ pieces: number; longest: number; total: number }> {
  let longest = 0;
  let pieces = 0;
  const t0 = performance.now();
  for (;;) {
    const p0 = performance.now();
    const step = it.next();
    longest = Math.max(longest, ms(p0));
    if (step.done) break;
    pieces++;
    onPiece?.(step.value);
    await new Promise((r) => setImmediate(r));
  }
  return { pieces, longest, total: ms(t0) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { hosts: { type: 'string', default: '1000' }, clusters: { type: 'string', default: '1000' }, jobs: { type: 'string', default: '100000' } } });
  const [hostCount, clusterCount, jobCount] = [Number(values.hosts), Number(values.clusters), Number(values.jobs)];
  // Settled before as after: what module loading left to collect must not count against the state.
  global.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  let t0 = performance.now();
  const state = loadFleetStateDirectly(hostCount, clusterCount, jobCount);
  console.log(`loaded ${hostCount} hosts, ${clusterCount} clusters, ${Object.keys(state.jobs).length} kept jobs through apply in ${ms(t0).toFixed(0)} ms (bench-only loader)`);
  global.gc?.();
  console.log(`heap taken by the state: ~${((process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024).toFixed(0)} MB${global.gc ? '' : ' (run with --expose-gc for a settled figure)'}`);

  t0 = performance.now();
  const image = snapshotMeta(state);
  const oneBlock = ms(t0);
  let bytes = 0;
  const snapshot = await timePieces(snapshotMetaChunks(state), (piece) => (bytes += piece.byteLength));
  if (bytes !== image.byteLength) throw new Error(`pieces hold ${bytes} bytes, the image ${image.byteLength}`);
  console.log(`snapshot image: ${(image.byteLength / 1024 / 1024).toFixed(1)} MB`);
  console.log(`event-loop block of one snapshot: as one image ${oneBlock.toFixed(0)} ms; in ${snapshot.pieces} pieces, longest piece ${snapshot.longest.toFixed(1)} ms (${snapshot.total.toFixed(0)} ms from first to last piece)`);
  t0 = performance.now();
  JSON.parse(new TextDecoder().decode(image));
  console.log(`restore of the image as one JSON.parse (how it was): ${ms(t0).toFixed(0)} ms`);
  const restore = await timePieces(restoreMetaInPieces(image));
  console.log(`restore in ${restore.pieces} pieces (restoreMetaInPieces: restart / follower install): longest piece ${restore.longest.toFixed(1)} ms (${restore.total.toFixed(0)} ms first to last)`);
}

// Imported by the group bench and a test for its loader: run only as a script.
if (process.argv[1]?.endsWith('meta-state.ts')) main().catch((err) => {
  console.error(err);
  process.exit(1);
});

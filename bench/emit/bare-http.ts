// Runs bench/emit's job workload against bare-http-server.ts: the same envelopes, client
// and concurrency, answered by a server that does nothing but HTTP and JSON.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { CpuMeter, perOp, type CpuUse } from '../raft-kv/cpu';
import { REPO_ROOT } from '../../test/manager/helpers/processes';
import { asyncJobsPhase, type AsyncPhaseResult, type HostCounter } from './emit-load';

const BARE_MEMBER = '127.0.1.59:18330';

export interface BareHttpRow {
  concurrency: number;
  result: AsyncPhaseResult;
  /** CPU ms per request: the server's (as the only member) and the load generator's. */
  cpuMs: CpuUse;
}

async function startServer(): Promise<ChildProcess> {
  const [host, port] = BARE_MEMBER.split(':');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'bench/emit/bare-http-server.ts'), host, port], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    child.once('exit', (code) => reject(new Error(`bare HTTP server exited with ${code}`)));
  });
  return child;
}

export async function benchBareHttp(concurrencies: number[], seconds: number): Promise<BareHttpRow[]> {
  const server = await startServer();
  try {
    const target = { members: [BARE_MEMBER], baseDir: '/unused' };
    const hosts: HostCounter = { next: 0 };
    await asyncJobsPhase(target, 4, 1, hosts, 'bare-warmup');
    const rows: BareHttpRow[] = [];
    for (const concurrency of concurrencies) {
      const meter = new CpuMeter(() => [server.pid]);
      meter.start();
      const result = await asyncJobsPhase(target, concurrency, seconds, hosts, `bare-c${concurrency}`);
      const cpuMs = perOp(meter.used(), result.ops);
      console.log(
        `bare   c=${String(concurrency).padStart(3)}  ${result.opsPerSec.toFixed(0).padStart(6)}/s  p50 ${result.p50.toFixed(1).padStart(6)}  p99 ${result.p99.toFixed(1).padStart(6)} ms  ` +
          `CPU ms per request: server ${cpuMs.members[0].toFixed(3)}, client ${cpuMs.client.toFixed(3)}  failed ${result.errors}`,
      );
      rows.push({ concurrency, result, cpuMs });
    }
    return rows;
  } finally {
    server.kill('SIGKILL');
  }
}

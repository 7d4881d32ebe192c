// bench:cluster: create_cluster from submit to done, beside a plain script doing the same
// raw engine work (raw-cluster.sh) on the same machine in the same run. Target: within 1.5x.
//
//   flock /tmp/kcm-system.lock npm run bench:cluster -- [--runs 2] [--shapes 1x3+1,2x3+2] [--keep]
//
// Set-up: the cluster test fixture (test/cluster/cluster-fixture.ts) with every agent its own
// OS process, as deployed, and a one-member manager; three loopback hosts registered as
// storage and computer machines. Each run of a shape does the managed create (then a
// delete, not timed) and the raw script's `up` (then `down`), alternating which goes first.
// The managed time is split by step from the manager's kcm_job_step_duration_seconds.

import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { computerPorts, HOSTS, startClusterFixture, storagePorts, type ClusterFixture } from '../../test/cluster/cluster-fixture';
import { clusterParas } from '../../test/cluster/cluster-paras';
import { emit, waitForJobEnd } from '../../test/helpers/emit-client';

const { values: flags } = parseArgs({
  options: { runs: { type: 'string', default: '2' }, shapes: { type: 'string', default: '1x3+1,2x3+2' }, keep: { type: 'boolean', default: false } },
});
const runs = Number(flags.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be an integer >= 1');
interface Shape { name: string; shards: number; nodes: number; comps: number }
const shapes: Shape[] = flags.shapes!.split(',').map((s) => {
  const m = /^(\d+)x(\d+)\+(\d+)$/.exec(s.trim());
  if (!m) throw new Error(`--shapes: ${s} is not <shards>x<nodes>+<comps>`);
  return { name: s.trim(), shards: Number(m[1]), nodes: Number(m[2]), comps: Number(m[3]) };
});
if (flags.keep) process.env.KCM_TEST_KEEP_DIR = '1';

const AGENT_PORT = 58187;
const MEMBER = '127.0.1.79:58179';
const RAW_SCRIPT = fileURLToPath(new URL('./raw-cluster.sh', import.meta.url));
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const fmt = (n: number) => n.toFixed(1);

/** create_cluster's step durations so far on the member (seconds, by step). */
async function stepSeconds(): Promise<Map<string, number>> {
  const text = await (await fetch(`http://${MEMBER}/metrics`)).text();
  const sums = new Map<string, number>();
  for (const m of text.matchAll(/^kcm_job_step_duration_seconds_sum\{job_type="create_cluster",step="([^"]+)"\} (\S+)$/gm)) sums.set(m[1], Number(m[2]));
  return sums;
}

async function managedCreate(f: ClusterFixture, shape: Shape): Promise<{ seconds: number; steps: string }> {
  const before = await stepSeconds();
  const started = performance.now();
  const ack = await emit(MEMBER, 'create_cluster', clusterParas({
    nick_name: `bench${shape.shards}x${shape.nodes}`, shards: String(shape.shards), nodes: String(shape.nodes), comps: String(shape.comps),
    innodb_size: '128', computer_iplists: [...HOSTS],
  }));
  const end = await waitForJobEnd([MEMBER], ack.job_id, 600_000);
  const seconds = (performance.now() - started) / 1000;
  if (end.status !== 'done') throw new Error(`create_cluster ${shape.name} ended ${end.status}: ${end.error_info}`);
  const after = await stepSeconds();
  const steps = [...after].map(([step, s]) => `${step} ${fmt(s - (before.get(step) ?? 0))}`).join(', ');
  const clusterId = (end.attachment as { cluster_id: string }).cluster_id;
  const del = await emit(MEMBER, 'delete_cluster', { cluster_id: clusterId });
  const deleted = await waitForJobEnd([MEMBER], del.job_id, 300_000);
  if (deleted.status !== 'done') throw new Error(`delete_cluster ${clusterId} ended ${deleted.status}: ${deleted.error_info}`);
  return { seconds, steps };
}

function script(action: 'up' | 'down', dir: string, shape: Shape): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, HOSTS: HOSTS.join(' '), SHARDS: String(shape.shards), NODES: String(shape.nodes), COMPS: String(shape.comps), PORT_BASE: '55400' };
    const child = spawn('bash', [RAW_SCRIPT, action, dir], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => (code === 0 ? resolve(stderr) : reject(new Error(`raw-cluster.sh ${action} exited ${code}: ${stderr.slice(-500)}`))));
  });
}

async function rawCreate(shape: Shape, workDir: string): Promise<{ seconds: number; steps: string }> {
  const dir = path.join(workDir, `raw-${shape.name}`);
  const started = performance.now();
  try {
    const phases = [...(await script('up', dir, shape)).matchAll(/^(\d+\.\d+) (.+)$/gm)].map((m) => ({ at: Number(m[1]), name: m[2] }));
    const seconds = (performance.now() - started) / 1000;
    const steps = phases.slice(0, -1).map((p, i) => `${p.name} ${fmt(phases[i + 1].at - p.at)}`).join(', ');
    return { seconds, steps };
  } finally {
    await script('down', dir, shape);
  }
}

let fixture: ClusterFixture | undefined;
const workDir = mkdtempSync(path.join(os.tmpdir(), 'kcm-bench-cluster-'));
chmodSync(workDir, 0o755); // the raw script's postgres runs as the postgres OS user and must reach its directory
try {
  log('starting three agents (own processes) and a one-member manager');
  fixture = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER, processAgentHosts: HOSTS });
  for (const [i, host] of HOSTS.entries()) {
    for (const [type, range] of [['storage', storagePorts(i)], ['computer', computerPorts(i)]] as const) {
      const reply = await fixture.runJob('create_machine', { hostaddr: host, machine_type: type, port_range: `${range.low}-${range.high}`, rack_id: 'r1', ...fixture.dirs(i), total_mem: '8192', total_cpu_cores: '4' });
      if (reply.status !== 'done') throw new Error(`create_machine ${host} ${type}: ${reply.error_info}`);
    }
  }
  const lines: string[] = [];
  for (const shape of shapes) {
    const managed: number[] = [];
    const raw: number[] = [];
    for (let r = 0; r < runs; r++) {
      const order = r % 2 === 0 ? (['managed', 'raw'] as const) : (['raw', 'managed'] as const);
      for (const which of order) {
        const out = which === 'managed' ? await managedCreate(fixture, shape) : await rawCreate(shape, workDir);
        (which === 'managed' ? managed : raw).push(out.seconds);
        log(`${shape.name} run ${r + 1} ${which.padEnd(7)} ${fmt(out.seconds)} s   (${out.steps})`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
    lines.push(`create_cluster ${shape.name.padEnd(6)} managed ${managed.map(fmt).join(' / ')} s   raw script ${raw.map(fmt).join(' / ')} s   managed/raw (medians) ${(median(managed) / median(raw)).toFixed(2)}x   (target <= 1.5x)`);
  }
  console.log(lines.join('\n'));
} finally {
  await fixture?.close();
  if (!flags.keep) rmSync(workDir, { recursive: true, force: true });
}

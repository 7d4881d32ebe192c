// Fuzzing with the names Object.prototype answers to. Every request fixture, with each of
// its string fields (envelope and paras, nested, array elements) and each of its object
// keys in turn replaced by a prototype name, is posted to a real one-member manager:
// - the reply is a well-formed envelope and never a 5xx;
// - an acknowledged job has a job id that get_status finds, with the job type sent;
// - a refused request (or a query) leaves machines, clusters, ports, jobs, request ids
//   and counters exactly as they were.
// The manager's job runner is stopped (see in-process-manager.ts): acknowledgement is what
// is checked here, and nothing but the requests sent changes the state.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOB_MODES, canonicalJobType, type ReplyEnvelope } from '@kcm/protocol';
import { CommandKind } from '../../src/meta/commands';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { storedAccount } from '../../../../test/helpers/secrets';

const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];
const FIXTURES_DIR = path.resolve(__dirname, '../../../../test/fixtures/emit');
const HOSTS = ['127.0.2.1', '127.0.2.2', '127.0.2.3', '127.0.2.4'];
/** Stands for a request id of its own in every variant that does not fuzz request_id itself. */
const OWN_REQUEST_ID = '<own request id>';

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

interface Variant {
  /** Where the name went, e.g. `paras.storage_iplists[1]` or `key paras.cluster_id`. */
  where: string;
  body: Json;
}

/**
 * Every way of putting `name` in one place of `value`: each string replaced, each object
 * key renamed. Objects are rebuilt with Object.fromEntries, so a key "__proto__" is an own
 * key that JSON.stringify writes out (an assignment would set the prototype instead).
 */
function* placements(value: Json, name: string, where: string): Generator<Variant> {
  if (typeof value === 'string') {
    yield { where, body: name };
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      for (const inner of placements(value[i], name, `${where}[${i}]`)) {
        yield { where: inner.where, body: value.map((v, j) => (j === i ? inner.body : v)) };
      }
    }
  } else if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value);
    for (const [key, child] of entries) {
      const at = where === '' ? key : `${where}.${key}`;
      for (const inner of placements(child, name, at)) {
        yield { where: inner.where, body: Object.fromEntries(entries.map(([k, v]) => [k, k === key ? inner.body : v])) };
      }
      yield { where: `key ${at}`, body: Object.fromEntries(entries.map(([k, v]) => [k === key ? name : k, v])) };
    }
  }
}

function loadFixtures(): { name: string; body: Record<string, Json> }[] {
  return readdirSync(FIXTURES_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f.replace(/\.json$/, ''), body: { ...JSON.parse(readFileSync(path.join(FIXTURES_DIR, f), 'utf8')), request_id: OWN_REQUEST_ID } }));
}

const ENVELOPE_FIELDS = ['version', 'error_code', 'error_info', 'status', 'job_id', 'job_type'];

/** What is wrong with a reply as an envelope, or undefined. */
function envelopeProblem(reply: unknown): string | undefined {
  if (typeof reply !== 'object' || reply === null) return `not an object: ${JSON.stringify(reply)}`;
  const r = reply as Record<string, unknown>;
  const bad = ENVELOPE_FIELDS.filter((f) => typeof r[f] !== 'string');
  if (bad.length > 0) return `fields not strings: ${bad.join(', ')}`;
  if (!('attachment' in r) || (r.attachment !== null && typeof r.attachment !== 'object')) return 'attachment missing';
  return undefined;
}

let kcm: InProcessManager;

/** The parts of the state a request could change; jobs and request ids by count (they only grow). */
function stateFingerprint(): string {
  const s = kcm.manager.store.state();
  return JSON.stringify({
    machines: s.machines,
    clusters: s.clusters,
    ports: s.ports,
    counters: s.counters,
    clusterCounters: s.clusterCounters,
    jobs: Object.keys(s.jobs).length,
    requestIds: Object.keys(s.requestIds).length,
    runQueues: Object.keys(s.runQueues).length,
  });
}

beforeAll(async () => {
  kcm = await startInProcessManager();
  // What the fixtures refer to: machines 127.0.2.1-4 and cluster 1 (shards 1 and 2, two
  // compute nodes), named as get_cluster_detail's fixture names it, ready; so that
  // variants get past "not found" into every deeper check.
  const at = 1_700_000_000_000;
  for (const hostaddr of HOSTS) {
    await kcm.registerMachine(hostaddr, 'storage', 57000);
    await kcm.registerMachine(hostaddr, 'computer', 59000);
  }
  const account = storedAccount({ user: 'u', password: 'p' });
  await kcm.commit({
    kind: CommandKind.ClusterCreated, at, jobId: '0', nickName: 'fuzz',
    options: { haMode: 'rbr', maxStorageSizeGb: 1, maxConnections: 10, cpuCores: 1, cpuLimitNode: 'quota', innodbSizeMb: 64, rocksdbBlockCacheSizeMb: 0, dbcfg: 0, fullsyncLevel: 1 },
    accounts: { admin: account, replication: account, storage: account, computer: account },
    placement: { newShards: [{ hosts: HOSTS.slice(0, 3) }, { hosts: HOSTS.slice(1, 4) }], newNodes: [], newComps: HOSTS.slice(0, 2) },
  });
  await kcm.commit({ kind: CommandKind.ClusterStatusSet, at, clusterId: '1', status: 'ready' });
});
afterAll(() => kcm?.close());

describe('prototype names in every string field and key of every request fixture', () => {
  it('never answer 5xx, always answer an envelope, acknowledge only jobs get_status finds, and a refusal changes nothing', async () => {
    const problems: string[] = [];
    const outcomes = new Map<string, number>();
    let sent = 0;
    let ownIds = 0;
    for (const fixture of loadFixtures()) {
      for (const name of PROTOTYPE_NAMES) {
        for (const variant of placements(fixture.body, name, '')) {
          const body = variant.body as Record<string, Json>;
          if (body.request_id === OWN_REQUEST_ID) body.request_id = `fuzz-${++ownIds}`;
          const what = `${fixture.name}: ${variant.where} = ${name}`;
          const before = stateFingerprint();
          const { status, reply } = await kcm.emit(body);
          sent++;
          const problem = envelopeProblem(reply);
          if (status >= 500) problems.push(`${what}: HTTP ${status} ${JSON.stringify(reply)}`);
          if (problem) {
            problems.push(`${what}: ${problem}`);
            continue;
          }
          outcomes.set(reply.error_code, (outcomes.get(reply.error_code) ?? 0) + 1);
          const jobType = typeof body.job_type === 'string' ? canonicalJobType(body.job_type) : undefined;
          const acknowledged = reply.error_code === '0' && jobType !== undefined && JOB_MODES[jobType] === 'async';
          if (acknowledged) problems.push(...(await acknowledgementProblems(what, reply, String(body.job_type))));
          else if (stateFingerprint() !== before) problems.push(`${what}: answered ${reply.error_code} (${reply.error_info}) but changed the state`);
        }
      }
    }
    console.log(`prototype-name fuzz: ${sent} requests; replies by error_code: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`);
    expect(problems).toEqual([]);
    expect(sent).toBeGreaterThan(1000);
    // Both sides were exercised: some variants were acknowledged, many refused.
    expect(outcomes.get('0') ?? 0).toBeGreaterThan(50);
    expect(sent - (outcomes.get('0') ?? 0)).toBeGreaterThan(500);
  });
});

/** An acknowledged job: accept, a decimal job id, and get_status finds it under the job type sent. */
async function acknowledgementProblems(what: string, reply: ReplyEnvelope, sentJobType: string): Promise<string[]> {
  if (reply.status !== 'accept' || !/^[1-9][0-9]*$/.test(reply.job_id)) return [`${what}: acknowledged as ${JSON.stringify(reply)}`];
  const polled = await kcm.emit({ version: '1.0', job_id: reply.job_id, job_type: 'get_status', timestamp: '1700000000', paras: {} });
  if (polled.reply.error_code !== '0' || polled.reply.job_type !== sentJobType) {
    return [`${what}: job ${reply.job_id} acknowledged but get_status answers ${JSON.stringify(polled.reply)}`];
  }
  return [];
}

// Three real manager processes (127.0.1.111-113), no agents. A follower is SIGSTOPped for
// 20 s, longer than the gRPC keepalive (10 s ping + 5 s timeout), so its peers drop the
// connections to it. The first linearizable read on it after SIGCONT must still be
// answered at once, not after the read's 10 s timeout (issue 12, defect 4: a ReadIndex
// request or response written into a connection that was already dead was lost for good).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emitRaw } from '../helpers/emit-client';
import { LocalGroup } from './helpers/group';
import { sleep } from './helpers/processes';

const MEMBERS = ['127.0.1.111:18400', '127.0.1.112:18400', '127.0.1.113:18400'];
const PAUSE_MS = 20_000;

describe('a follower SIGSTOPped past the keepalive timeout', () => {
  let group: LocalGroup;

  beforeAll(async () => {
    group = new LocalGroup({ name: 'paused-follower-read', members: MEMBERS, agentHosts: [], agentPort: 18490 });
    await group.start();
    await group.waitForLeader();
  }, 90_000);

  afterAll(async () => {
    await group?.stop();
  }, 30_000);

  it('answers its first read after SIGCONT within a few seconds', async () => {
    const leader = await group.waitForLeader();
    const follower = MEMBERS.find((m) => m !== leader)!;
    expect((await emitRaw(follower, 'get_cluster_summary')).error_code).toBe('0');

    await group.manager(follower).signal('SIGSTOP');
    await sleep(PAUSE_MS);
    await group.manager(follower).signal('SIGCONT');

    const started = Date.now();
    const reply = await emitRaw(follower, 'get_cluster_summary', {}, { timeoutMs: 20_000 });
    const tookMs = Date.now() - started;
    console.log(`first read on ${follower} after a ${PAUSE_MS} ms pause: error_code ${reply.error_code} in ${tookMs} ms`);
    expect(reply.error_code, reply.error_info).toBe('0');
    expect(tookMs).toBeLessThan(3_000);
  }, 60_000);
});

// The request-rate limit on a real 3-manager group: a token sending faster than
// emitRatePerSecond gets OVERLOADED (HTTP 429) replies in the envelope, never a 5xx, while
// another token on the same member is still served; the processes keep running.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { KcmError } from '@kcm/protocol';
import { LocalGroup } from '../manager/helpers/group';
import { requestEnvelope } from '../helpers/emit-client';
import { authHeader } from '../helpers/tokens';

const MEMBERS = ['127.0.1.94:58394', '127.0.1.95:58394', '127.0.1.96:58394'];

describe('Emit above the request rate (3 manager processes)', () => {
  let group: LocalGroup;
  beforeAll(async () => {
    group = new LocalGroup({ name: 'rate-limit', members: MEMBERS, agentHosts: [], agentPort: 58398, managerConfig: { tickMs: 50, emitRatePerSecond: 20, emitRateBurst: 20 } });
    await group.start();
    await group.waitForLeader();
  }, 120_000);
  afterAll(() => group?.stop());

  it('is refused with the envelope and HTTP 429, never a 5xx; another token is still served', async () => {
    const send = async (role: 'admin' | 'viewer') => {
      const res = await request(`http://${MEMBERS[0]}/HttpService/Emit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...authHeader(role) },
        body: JSON.stringify(requestEnvelope('get_meta_mode')),
      });
      return { status: res.statusCode, reply: (await res.body.json()) as Record<string, string> };
    };
    const replies = await Promise.all(Array.from({ length: 120 }, () => send('admin')));
    const byStatus = new Map<number, number>();
    for (const r of replies) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    expect([...byStatus.keys()].sort()).toEqual([200, 429]);
    expect(byStatus.get(200)).toBeLessThanOrEqual(25);
    const refused = replies.find((r) => r.status === 429)!.reply;
    expect(refused).toMatchObject({ version: '1.0', error_code: String(KcmError.of('OVERLOADED', '').code), status: 'failed', job_id: '', attachment: null });
    expect(refused.error_info).toMatch(/request rate limit: more than 20 requests\/s from token test-admin/);
    expect((await send('viewer')).status).toBe(200);
    for (const m of group.managers.values()) expect(m.running, m.name).toBe(true);
  });
});

// Issue 12, defect 3: the CLI always sends a request_id with a job, and sends the job again
// with the same one when the manager could not say whether it was created.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { MACHINE_PARAS } from '../../manager/test/gateway/helpers';
import { SUBMIT_RETRY_PAUSES_MS } from '../src/submit';
import { runKcm, startGateway, type LiveGateway } from './helpers';

let gateway: LiveGateway;
beforeEach(async () => {
  gateway = await startGateway();
});
afterEach(async () => {
  await gateway.close();
});

/** The real fetch, recording the request_id of every envelope sent. */
function recordingFetch(): { fetch: typeof fetch; requestIds: (string | undefined)[] } {
  const requestIds: (string | undefined)[] = [];
  const recording: typeof fetch = (input, init) => {
    requestIds.push((JSON.parse(String(init?.body)) as { request_id?: string }).request_id);
    return fetch(input, init);
  };
  return { fetch: recording, requestIds };
}

const noWait = async () => {};

describe('kcm emit and request_id', () => {
  it('gives every job a request_id of its own, and sends --request-id as given', async () => {
    const paras = ['--paras', JSON.stringify(MACHINE_PARAS)];
    expect((await runKcm(['emit', 'create_machine', ...paras], { url: gateway.url })).code).toBe(0);
    expect((await runKcm(['emit', 'create_machine', ...paras], { url: gateway.url })).code).toBe(0);
    expect((await runKcm(['emit', 'create_machine', ...paras, '--request-id', 'mine-1'], { url: gateway.url })).code).toBe(0);
    const [first, second, given] = gateway.service.submitted.map((r) => r.envelope.request_id);
    expect(first).toMatch(/^kcm-cli-[0-9a-f-]{36}$/);
    expect(second).toMatch(/^kcm-cli-[0-9a-f-]{36}$/);
    expect(second).not.toBe(first);
    expect(given).toBe('mine-1');
  });

  it('sends a job again with the same request_id after NO_LEADER, and says so', async () => {
    const sent = recordingFetch();
    gateway.service.nextError = KcmError.of('NO_LEADER', 'outcome unknown: leadership moved while the command was pending; retry with the same request_id');
    const cli = await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url, fetch: sent.fetch, sleep: noWait });
    expect(cli.code).toBe(0);
    expect(cli.stdout).toBe('accepted: create_machine job 1\nfollow it with: kcm status 1 --wait\n');
    expect(sent.requestIds).toHaveLength(2);
    expect(sent.requestIds[1]).toBe(sent.requestIds[0]);
    expect(cli.stderr).toBe(`kcm: outcome unknown: leadership moved while the command was pending; retry with the same request_id; sending again with the same request_id ${sent.requestIds[0]}\n`);
  });

  it('when no attempt is answered, names the request_id to run the command again with', async () => {
    await gateway.close();
    const sent = recordingFetch();
    const cli = await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url, fetch: sent.fetch, sleep: noWait });
    expect(cli.code).toBe(3);
    expect(sent.requestIds).toHaveLength(1 + SUBMIT_RETRY_PAUSES_MS.length);
    expect(new Set(sent.requestIds).size).toBe(1);
    expect(cli.stderr).toContain(`run the command again with --request-id ${sent.requestIds[0]} to find out`);
    gateway = await startGateway();
  });

  it('sends a query once, without a request_id', async () => {
    const sent = recordingFetch();
    gateway.service.nextError = KcmError.of('NO_LEADER', 'no leader is known');
    const cli = await runKcm(['get', 'get_meta_mode'], { url: gateway.url, fetch: sent.fetch, sleep: noWait });
    expect(cli.code).toBe(1);
    expect(sent.requestIds).toEqual([undefined]);
  });
});

describe('kcm emit with several managers (--url a,b: a rolling restart of the group)', () => {
  it('passes over a manager that cannot be reached, and asks the next one after NO_LEADER, with one request_id throughout', async () => {
    const down = await startGateway();
    await down.close(); // a manager restarting: nothing listens at its address
    const other = await startGateway();
    try {
      const sent = recordingFetch();
      const urls = `${down.url},${gateway.url},${other.url}`;
      gateway.service.nextError = KcmError.of('NO_LEADER', 'no leader known yet; retry');
      const cli = await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: urls, fetch: sent.fetch, sleep: noWait });
      expect(cli.code).toBe(0);
      // down (refused), gateway (NO_LEADER), then the next attempt starts at the next manager: other.
      expect(sent.requestIds).toHaveLength(3);
      expect(new Set(sent.requestIds).size).toBe(1);
      expect(other.service.submitted.map((r) => r.envelope.request_id)).toEqual([sent.requestIds[0]]);
      expect(cli.stderr).toMatch(/no leader known yet; retry; sending again with the same request_id/);
    } finally {
      await other.close();
    }
  });

  it('refuses a --url list with an entry that is not an http URL, naming it', async () => {
    const cli = await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: `${gateway.url},ftp://x` });
    expect(cli.code).not.toBe(0);
    expect(cli.stderr).toMatch(/--url must be an http:\/\/ or https:\/\/ URL \(or several, comma-separated\), got "ftp:\/\/x"/);
  });
});

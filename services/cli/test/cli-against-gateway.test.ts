import { TEST_TOKENS, testTokenLookup } from '../../../test/helpers/tokens';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { failingScript } from '../../manager/test/gateway/fake-job-service';
import { MACHINE_PARAS } from '../../manager/test/gateway/helpers';
import { runKcm, startGateway, type LiveGateway } from './helpers';

const FAST = ['--interval', '0.01'];

let gateway: LiveGateway;
beforeEach(async () => {
  gateway = await startGateway();
});
afterEach(async () => {
  await gateway.close();
});

describe('local validation', () => {
  it('bad paras fail locally, unsent, with exactly the message the server returns for the same body', async () => {
    const paras = { ...MACHINE_PARAS, total_mem: '-5', port_range: '9-1' };
    const cli = await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(paras)], { url: gateway.url });
    expect(cli.code).toBe(1);
    expect(gateway.service.submitted).toHaveLength(0);

    const body = { version: '1.0', job_id: '', job_type: 'create_machine', timestamp: '1700000000', user_name: 'alice', paras };
    const server = (await (await fetch(`${gateway.url}/HttpService/Emit`, { method: 'POST', body: JSON.stringify(body) })).json()) as Record<string, string>;
    expect(server.error_code).toBe('1004');
    expect(cli.stderr).toBe(`kcm: not sent, the request is invalid: error 1004 INVALID_PARAS: ${server.error_info}\n`);

    const cliJson = await runKcm(['emit', 'create_machine', '--json', '--paras', JSON.stringify(paras)], { url: gateway.url });
    expect(JSON.parse(cliJson.stdout)).toEqual(server);
  });

  it('a misspelt job type fails locally with the server message and the spelling echoed', async () => {
    const cli = await runKcm(['emit', 'create_clustr', '--json'], { url: gateway.url });
    const server = (await (
      await fetch(`${gateway.url}/HttpService/Emit`, { method: 'POST', body: JSON.stringify({ version: '1.0', job_type: 'create_clustr', timestamp: '1', paras: {} }) })
    ).json()) as Record<string, string>;
    expect(cli.code).toBe(1);
    expect(JSON.parse(cli.stdout)).toEqual(server);
    expect(server.error_code).toBe(String(KcmError.of('UNKNOWN_JOB_TYPE', '').code));
  });

  it('--paras that is not JSON is a usage error pointing at help', async () => {
    const cli = await runKcm(['emit', 'create_machine', '--paras', '{hostaddr:1}'], { url: gateway.url });
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/--paras is not valid JSON/);
    expect(cli.stderr).toContain("Run 'kcm emit --help' for usage.");
  });
});

describe('emit and status', () => {
  it('emit sends a fresh envelope with version 1.0, timestamp now and user_name from $USER, and prints the job id', async () => {
    const before = Math.floor(Date.now() / 1000);
    const cli = await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    expect(cli.code).toBe(0);
    expect(cli.stdout).toBe('accepted: create_machine job 1\nfollow it with: kcm status 1 --wait\n');
    const sent = gateway.service.submitted[0].envelope;
    expect(sent).toMatchObject({ version: '1.0', job_type: 'create_machine', user_name: 'alice' });
    expect(Number(sent.timestamp)).toBeGreaterThanOrEqual(before);
  });

  it('emit --wait follows a progressing job to done with plain lines when stdout is not a terminal', async () => {
    const cli = await runKcm(['emit', 'create_machine', '--wait', ...FAST, '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    expect(cli.code).toBe(0);
    expect(cli.stdout.split('\n')).toEqual([
      'accepted: create_machine job 1',
      'job 1 create_machine: started',
      'job 1 create_machine: ongoing, step 1/3 prepare',
      'job 1 create_machine: ongoing, step 2/3 copy_rows, 500/1000 rows',
      'job 1 create_machine: ongoing, step 3/3 verify',
      'job 1 create_machine: done',
      'finished: create_machine',
      '',
    ]);
    expect(cli.stdout).not.toMatch(/[\r\x1b]/);
  });

  it('status --wait on a terminal redraws one progress bar and ends on a new line', async () => {
    await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    const cli = await runKcm(['status', '1', '--wait', ...FAST], { url: gateway.url, tty: true });
    expect(cli.code).toBe(0);
    const frames = cli.stdout.split('\r\x1b[2K').filter(Boolean);
    expect(frames[0]).toMatch(/^\[\.+\] job 1 create_machine: started$/);
    expect(frames).toContain('[############------------]  50% job 1 create_machine: ongoing, step 2/3 copy_rows, 500/1000 rows');
    expect(frames.at(-1)).toMatch(/^\[#{24}\] 100% job 1 create_machine: done\nfinished: create_machine\n$/);
  });

  it('status --wait exits 1 with the job error when the job fails', async () => {
    gateway.service.script = failingScript;
    await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    const cli = await runKcm(['status', '1', '--wait', ...FAST], { url: gateway.url });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toBe('kcm: job 1 create_machine failed: error 2001 INSTANCE_FAILED: mariadbd exited with status 1\n');
  });

  it('status without --wait prints the current state once; an unknown job exits 1 with NOT_FOUND', async () => {
    await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    const now = await runKcm(['status', '1'], { url: gateway.url });
    expect(now).toMatchObject({ code: 0, stdout: 'job 1 create_machine: started\n' });
    const missing = await runKcm(['status', '42'], { url: gateway.url });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('error 1005 NOT_FOUND: job 42 does not exist');
  });

  it('waiting rides out a manager with no leader, noting it once', async () => {
    await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    gateway.service.nextError = KcmError.of('NO_LEADER', 'no leader is known');
    const cli = await runKcm(['status', '1', '--wait', ...FAST], { url: gateway.url });
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain('kcm: the manager cannot answer yet (no leader is known); retrying\n');
    expect(cli.stdout).toContain('job 1 create_machine: done');
  });

  it('--timeout gives up with exit 4 on a job that never ends', async () => {
    gateway.service.script = () => [{ status: 'ongoing', errorCode: 0, errorInfo: '', attachment: null }];
    await runKcm(['emit', 'create_machine', '--paras', JSON.stringify(MACHINE_PARAS)], { url: gateway.url });
    const cli = await runKcm(['status', '1', '--wait', '--interval', '0.02', '--timeout', '0.1'], { url: gateway.url });
    expect(cli.code).toBe(4);
    expect(cli.stderr).toContain('gave up waiting for job 1 after 0.1s');
  });

  it('--file accepts a whole envelope (a fixture) or bare paras', async () => {
    const fixture = await runKcm(['emit', '--file', join(import.meta.dirname, '../../../test/fixtures/emit/create_machine.json')], { url: gateway.url });
    expect(fixture.code).toBe(0);
    expect(gateway.service.submitted[0].jobType).toBe('create_machine');
    const dir = mkdtempSync(join(tmpdir(), 'kcm-cli-'));
    writeFileSync(join(dir, 'paras.json'), JSON.stringify(MACHINE_PARAS));
    const bare = await runKcm(['emit', 'create_machine', '--file', join(dir, 'paras.json')], { url: gateway.url });
    expect(bare.code).toBe(0);
    expect(gateway.service.submitted[1].paras).toMatchObject({ rack_id: 'rack-1' });
  });
});

describe('get', () => {
  it('prints a query answer as an aligned table, or the raw envelope with --json', async () => {
    gateway.service.queryAnswers.get_machine_summary = {
      list_machine: [
        { hostaddr: '127.0.2.1', status: 'online' },
        { hostaddr: '127.0.2.10', status: 'offline' },
      ],
    };
    const text = await runKcm(['get', 'get_machine_summary'], { url: gateway.url });
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(['list_machine (2):', '  HOSTADDR    STATUS', '  ----------  -------', '  127.0.2.1   online', '  127.0.2.10  offline', ''].join('\n'));
    const json = await runKcm(['get', 'machine_summary', '--json'], { url: gateway.url });
    expect(JSON.parse(json.stdout)).toMatchObject({ status: 'done', job_type: 'get_machine_summary', attachment: gateway.service.queryAnswers.get_machine_summary });
  });

  it('refuses an async job type, pointing at emit', async () => {
    const cli = await runKcm(['get', 'create_cluster'], { url: gateway.url });
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain('is not a query (use kcm emit create_cluster)');
  });
});

describe('connection and auth', () => {
  it('an unreachable manager exits 3 with the URL in the message', async () => {
    await gateway.close();
    const cli = await runKcm(['get', 'get_meta_mode'], { url: gateway.url });
    expect(cli.code).toBe(3);
    expect(cli.stderr).toContain(`cannot reach the manager at ${gateway.url}`);
    gateway = await startGateway();
  });

  it('sends the token from --token or KCM_TOKEN; without one the manager refuses with exit 1', async () => {
    await gateway.close();
    gateway = await startGateway({ lookup: testTokenLookup() });
    const without = await runKcm(['get', 'get_meta_mode'], { url: gateway.url });
    expect(without.code).toBe(1);
    expect(without.stderr).toContain('error 3000 UNAUTHENTICATED');
    expect((await runKcm(['get', 'get_meta_mode', '--token', TEST_TOKENS.viewer], { url: gateway.url })).code).toBe(0);
    expect((await runKcm(['get', 'get_meta_mode'], { url: gateway.url, env: { KCM_TOKEN: TEST_TOKENS.viewer } })).code).toBe(0);
  });

  it("without --token or KCM_TOKEN, uses the local deployment's admin.token; --token wins over it", async () => {
    await gateway.close();
    gateway = await startGateway({ lookup: testTokenLookup() });
    const dir = mkdtempSync(join(tmpdir(), 'kcm-local-token-'));
    writeFileSync(join(dir, 'admin.token'), `${TEST_TOKENS.viewer}\n`, { mode: 0o600 });
    expect((await runKcm(['get', 'get_meta_mode'], { url: gateway.url, env: { KCM_LOCAL_DIR: dir } })).code).toBe(0);
    const wrong = await runKcm(['get', 'get_meta_mode', '--token', 'not-a-token'], { url: gateway.url, env: { KCM_LOCAL_DIR: dir } });
    expect(wrong.stderr).toContain('error 3000 UNAUTHENTICATED');
  });
});

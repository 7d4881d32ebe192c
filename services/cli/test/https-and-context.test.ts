// kcm over HTTPS (--ca, a context's ca) and the context file from the command line:
// kcm context list|use|show, endpoints and token taken from the current context, failover
// between a context's endpoints, and a bad file reported in one line naming file and field.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { ensureCa, issueCert } from '@kcm/agent-api';
import { buildGateway } from '../../manager/src/gateway/index';
import { FakeJobService } from '../../manager/test/gateway/fake-job-service';
import { TEST_TOKENS, testTokenLookup } from '../../../test/helpers/tokens';
import { saveContext } from '../src/context-file';
import { runKcm } from './helpers';

const dir = mkdtempSync(path.join(tmpdir(), 'kcm-cli-https-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const ca = ensureCa(path.join(dir, 'ca'));
const served = issueCert(ca, path.join(dir, 'certs'), { name: 'gateway', role: 'manager', hosts: ['127.0.0.1'] });

const open: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()));
});

/** A gateway serving HTTPS with the test CA's certificate, requiring the test tokens. */
async function httpsGateway(): Promise<{ url: string; service: FakeJobService }> {
  const service = new FakeJobService();
  service.queryAnswers.get_meta_mode = { mode: 'no_rep' };
  const app = buildGateway({ service, logger: silentLogger(), auth: { lookup: testTokenLookup() }, https: { files: { cert: served.cert, key: served.key }, configKey: 'tls' } });
  open.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { url: `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`, service };
}

const adminToken = ['--token', TEST_TOKENS.admin];

describe('kcm over HTTPS', () => {
  it('--ca makes the managers\' certificate trusted', async () => {
    const gw = await httpsGateway();
    const cli = await runKcm(['get', 'meta_mode', '--url', gw.url, '--ca', ca.cert, ...adminToken]);
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain('no_rep');
  });

  it('without the CA the certificate is refused, and kcm says to give --ca', async () => {
    const gw = await httpsGateway();
    const cli = await runKcm(['get', 'meta_mode', '--url', gw.url, ...adminToken]);
    expect(cli.code).toBe(3);
    expect(cli.stderr).toMatch(/cannot reach the manager at https:\/\/127\.0\.0\.1:\d+ \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY): the manager's HTTPS certificate is not trusted; give its CA with --ca <file>/);
  });

  it('plain http:// to the HTTPS port is answered with an error naming https://', async () => {
    const gw = await httpsGateway();
    const cli = await runKcm(['get', 'meta_mode', '--url', gw.url.replace('https:', 'http:'), ...adminToken]);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('this port serves HTTPS only: send the request to https://');
  });

  it('a --ca file that holds no certificate is a usage error naming it', async () => {
    const notPem = path.join(dir, 'not-a-ca.txt');
    writeFileSync(notPem, 'hello\n');
    const cli = await runKcm(['get', 'meta_mode', '--url', 'https://127.0.0.1:9', '--ca', notPem]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain(`kcm: --ca ${notPem}: no PEM certificate in it`);
  });
});

describe('kcm with a context file', () => {
  it('takes endpoints, CA and token from the current context, passing over an endpoint that does not answer', async () => {
    const gw = await httpsGateway();
    const file = path.join(dir, 'ctx-current.json');
    const tokenFile = path.join(dir, 'admin.token');
    writeFileSync(tokenFile, `${TEST_TOKENS.admin}\n`, { mode: 0o600 });
    // 127.0.0.1:9 (discard) refuses connections: the client goes on to the next endpoint.
    saveContext({ name: 'prod', endpoints: ['https://127.0.0.1:9', gw.url], caFile: ca.cert, tokenFile }, file);
    const cli = await runKcm(['get', 'meta_mode'], { env: { KCM_CONFIG: file } });
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain('no_rep');
  });

  it('--context picks another context; list marks the current one; use switches it; show prints it', async () => {
    const gw = await httpsGateway();
    const file = path.join(dir, 'ctx-switch.json');
    saveContext({ name: 'old', endpoints: ['https://127.0.0.1:9'] }, file);
    saveContext({ name: 'new', endpoints: [gw.url], caFile: ca.cert }, file);
    const env = { KCM_CONFIG: file };
    expect((await runKcm(['get', 'meta_mode', ...adminToken], { env })).code).toBe(3);
    expect((await runKcm(['get', 'meta_mode', '--context', 'new', ...adminToken], { env })).code).toBe(0);

    const listed = await runKcm(['context', 'list'], { env });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/\*\s+old\s+https:\/\/127\.0\.0\.1:9/);
    expect((await runKcm(['context', 'use', 'new'], { env })).stdout).toBe(`current context: new (${gw.url})\n`);
    expect((await runKcm(['get', 'meta_mode', ...adminToken], { env })).code).toBe(0);
    const shown = await runKcm(['context', 'show'], { env });
    expect(shown.stdout).toContain(`name: new (current)\nendpoints: ${gw.url}\nca: ${ca.cert}\n`);

    const unknown = await runKcm(['context', 'use', 'nope'], { env });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(`kcm: ${file}: no context "nope" (contexts: old, new)\n`);
  });

  it('--url wins over the current context', async () => {
    const gw = await httpsGateway();
    const file = path.join(dir, 'ctx-url.json');
    saveContext({ name: 'dead', endpoints: ['https://127.0.0.1:9'] }, file);
    const cli = await runKcm(['get', 'meta_mode', '--url', gw.url, '--ca', ca.cert, ...adminToken], { env: { KCM_CONFIG: file } });
    expect(cli.code).toBe(0);
  });

  it('a bad context file is one line naming the file and the field, exit 2', async () => {
    const file = path.join(dir, 'ctx-bad.json');
    writeFileSync(file, JSON.stringify({ current: 'prod', contexts: { prod: { endpoints: ['10.0.0.1:58000'] } } }));
    const cli = await runKcm(['get', 'meta_mode'], { env: { KCM_CONFIG: file } });
    expect(cli.code).toBe(2);
    expect(cli.stderr).toBe(`kcm: ${file}: contexts.prod.endpoints[0]: must be an http:// or https:// URL, got "10.0.0.1:58000"\n`);
  });

  it('a token_file that cannot be read names the context file and the field', async () => {
    const file = path.join(dir, 'ctx-token.json');
    saveContext({ name: 'prod', endpoints: ['https://127.0.0.1:9'], tokenFile: path.join(dir, 'missing.token') }, file);
    const cli = await runKcm(['get', 'meta_mode'], { env: { KCM_CONFIG: file } });
    expect(cli.code).toBe(2);
    expect(cli.stderr).toBe(`kcm: ${file}: contexts.prod.token_file: ${path.join(dir, 'missing.token')} cannot be read (ENOENT)\n`);
  });
});

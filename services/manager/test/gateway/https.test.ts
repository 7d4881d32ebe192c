// The gateway over HTTPS (https-listener.ts, https-reload.ts): plain HTTP answered from its
// first byte, the certificate reloaded from disk, a bad new pair refused and the old one kept.

import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '@kcm/common';
import { ensureCa, issueCert } from '@kcm/agent-api';
import { MemoryStorage } from '@kcm/raft';
import { buildGateway } from '../../src/gateway';
import { buildManager } from '../../src/app';
import { parseManagerConfig } from '../../src/config';
import { testSecretsKeyFile } from '../../../../test/helpers/secrets';
import { emitListenerOf, loadHttpsPair } from '../../src/gateway/https-listener';
import { TEST_TOKENS, testTokenLookup } from '../../../../test/helpers/tokens';
import { FakeJobService } from './fake-job-service';
import { plainExchange, servedSerial as probeSerial } from '../../../../test/helpers/tls-probes';

const dir = mkdtempSync(path.join(tmpdir(), 'kcm-https-gw-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const ca = ensureCa(path.join(dir, 'ca'));
const otherCa = ensureCa(path.join(dir, 'other-ca'), '/CN=another CA');
const issue = (name: string, from = ca) => issueCert(from, path.join(dir, 'certs'), { name, role: 'manager', hosts: ['127.0.0.1'] });

/** The gateway's own log lines, kept to search. */
function capturedLogger() {
  const lines: string[] = [];
  const logger = createLogger({ name: 'gateway', level: 'debug', destination: new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }) });
  return { logger, lines };
}

const started: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((app) => app.close()));
});

/** A gateway serving HTTPS with a copy of `from`'s files (so a test may overwrite them). */
async function httpsGateway(from: { cert: string; key: string }, name: string) {
  const files = { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) };
  copyFileSync(from.cert, files.cert);
  copyFileSync(from.key, files.key);
  const { logger, lines } = capturedLogger();
  const app = buildGateway({ service: new FakeJobService(), logger, auth: { lookup: testTokenLookup() }, member: '127.0.0.1:0', https: { files, configKey: 'https', reloadCheckMs: 100 } });
  started.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { app, port, files, lines };
}

const servedSerial = (port: number) => probeSerial('127.0.0.1', port, readFileSync(ca.cert));
const rawExchange = (port: number, bytes: string) => plainExchange('127.0.0.1', port, bytes);

async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`waited 10 s for ${what}`);
}

describe('which listener a member gets', () => {
  const tls = { ca: 'ca.pem', cert: 'm.pem', key: 'm.key' };
  it('HTTPS with its own tls certificate unless another is supplied; plain HTTP only when asked for', () => {
    expect(emitListenerOf({ tls, plainHttp: false, insecure: false })).toEqual({ scheme: 'https', files: { cert: 'm.pem', key: 'm.key' }, from: 'tls' });
    expect(emitListenerOf({ tls, https: { cert: 'pub.pem', key: 'pub.key' }, plainHttp: false, insecure: false })).toEqual({ scheme: 'https', files: { cert: 'pub.pem', key: 'pub.key' }, from: 'https' });
    expect(emitListenerOf({ tls, plainHttp: true, insecure: false })).toEqual({ scheme: 'http', because: 'plainHttp: true' });
    expect(emitListenerOf({ plainHttp: false, insecure: true })).toEqual({ scheme: 'http', because: 'insecure mode' });
  });

  it('a key of another certificate, or a missing file, is refused naming the file and the config key', () => {
    const a = issue('pair-a');
    const b = issue('pair-b');
    expect(() => loadHttpsPair({ cert: a.cert, key: b.key }, 'tls')).toThrow(`tls.key ${b.key}: not the key of ${a.cert}`);
    expect(() => loadHttpsPair({ cert: path.join(dir, 'absent.pem'), key: a.key })).toThrow(`https.cert ${path.join(dir, 'absent.pem')}: cannot read it (ENOENT)`);
  });
});

describe('a manager whose HTTPS files do not load', () => {
  it('is refused at build, naming the config key and the file', async () => {
    const missing = path.join(dir, 'no-such-https.pem');
    const member = '127.0.99.252:1';
    const config = parseManagerConfig({ member, dataDir: '/nonexistent', agentPort: 1, logLevel: 'silent', secretsKeyFile: testSecretsKeyFile(), https: { cert: missing, key: issue('unused').key } });
    await expect(buildManager(config, { logger: createLogger({ name: 'manager', level: 'silent' }), storage: MemoryStorage.bootstrap([member]) })).rejects.toThrow(`https.cert ${missing}: cannot read it (ENOENT)`);
  });
});

describe('the gateway over HTTPS', () => {
  it('serves Emit over HTTPS to a client trusting the CA', async () => {
    const gw = await httpsGateway(issue('serve'), 'serve');
    const serial = await servedSerial(gw.port);
    expect(serial).toBe(new X509Certificate(readFileSync(gw.files.cert)).serialNumber);
  });

  it('answers plain HTTP with one 400 envelope naming https://, and the token it carried is in no log line', async () => {
    const gw = await httpsGateway(issue('plain'), 'plain');
    const token = TEST_TOKENS.admin;
    const request = `POST /HttpService/Emit HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
    const answer = await rawExchange(gw.port, request);
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Record<string, string>;
    expect(body).toMatchObject({ status: 'failed', error_code: '1000' });
    expect(body.error_info).toContain('this port serves HTTPS only: send the request to https://127.0.0.1:0');
    // The gateway wrote its start-up lines: the capture works, and none of them has the token.
    expect(gw.lines.length).toBeGreaterThan(0);
    expect(gw.lines.join('\n')).not.toContain(token);
  });

  it('serves a certificate swapped on disk to new connections without a restart', async () => {
    const gw = await httpsGateway(issue('swap-old'), 'swap');
    const before = await servedSerial(gw.port);
    const next = issue('swap-new');
    const nextSerial = new X509Certificate(readFileSync(next.cert)).serialNumber;
    expect(nextSerial).not.toBe(before);
    // Key first, then certificate, as a renewal tool might: the half-written pair is not taken.
    writeFileSync(gw.files.key, readFileSync(next.key));
    writeFileSync(gw.files.cert, readFileSync(next.cert));
    await waitFor('the new certificate served', async () => ((await servedSerial(gw.port)) === nextSerial ? true : undefined));
    expect(gw.lines.some((l) => l.includes('"msg":"HTTPS certificate reloaded"') && l.includes(nextSerial))).toBe(true);
  });

  it('keeps serving the old certificate when the new pair is bad, and says so in the log', async () => {
    const gw = await httpsGateway(issue('bad-old'), 'bad');
    const before = await servedSerial(gw.port);
    const other = issue('bad-other', otherCa);
    writeFileSync(gw.files.cert, readFileSync(other.cert)); // the key on disk stays the old one: not this certificate's
    const warning = await waitFor('the refusal logged', () => gw.lines.find((l) => l.includes('HTTPS certificate files changed but are not used')));
    expect(warning).toContain(`https.key ${gw.files.key}: not the key of ${gw.files.cert}`);
    expect(await servedSerial(gw.port)).toBe(before);
  });
});

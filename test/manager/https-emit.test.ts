// Emit over HTTPS (issue 34 item 3): three real manager processes (127.0.1.211-213), no
// agents. .211 serves a certificate of its own (`https`), .212 its member certificate
// (`tls`), both issued by the test cluster CA; .213 is configured `plainHttp: true`.
// A client trusting the CA is served; one that does not is refused in the handshake; a
// plain-HTTP request to an HTTPS port is answered without being read, and the bearer token
// it carried is in no log line; a certificate renewed on disk is served without a restart.

import { X509Certificate, randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCert } from '@kcm/agent-api';
import type { ReplyEnvelope } from '@kcm/protocol';
import { emitRaw, requestEnvelope } from '../helpers/emit-client';
import { testCa } from '../helpers/pki';
import { httpsText, plainExchange as plainBytes, servedSerial as probeSerial } from '../helpers/tls-probes';
import { TEST_TOKENS, authHeader } from '../helpers/tokens';
import { main as kcm } from '../../services/cli/src/main';
import { LocalGroup } from './helpers/group';
import { waitFor } from './helpers/processes';

const OWN_CERT = '127.0.1.211:18450';
const MEMBER_CERT = '127.0.1.212:18450';
const PLAIN = '127.0.1.213:18450';
const MEMBERS = [OWN_CERT, MEMBER_CERT, PLAIN];
const HTTPS_MEMBERS = [OWN_CERT, MEMBER_CERT];
const AGENT_PORT = 18495;

const hostOf = (member: string) => member.slice(0, member.lastIndexOf(':'));
const portOf = (member: string) => Number(member.slice(member.lastIndexOf(':') + 1));

/** One HTTPS request trusting the test CA (`ca: null`: trusting only the system's CAs). */
function httpsCall(member: string, urlPath: string, opts: { body?: string; headers?: Record<string, string>; ca?: null } = {}): Promise<{ status: number; text: string }> {
  return httpsText(member, urlPath, { body: opts.body, headers: opts.headers, ca: opts.ca === null ? undefined : readFileSync(testCa().cert) });
}

async function httpsEmit(member: string, jobType: string, headers: Record<string, string> = authHeader()): Promise<ReplyEnvelope> {
  const { text } = await httpsCall(member, '/HttpService/Emit', { body: JSON.stringify(requestEnvelope(jobType)), headers });
  return JSON.parse(text) as ReplyEnvelope;
}

async function httpsMetric(member: string, sample: string): Promise<number | undefined> {
  const { text } = await httpsCall(member, '/metrics');
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}

const servedSerial = (member: string) => probeSerial(hostOf(member), portOf(member), readFileSync(testCa().cert));

const serialOf = (file: string) => new X509Certificate(readFileSync(file)).serialNumber;

describe('Emit over HTTPS', () => {
  let group: LocalGroup;
  let certDir = '';
  /** The files .211 is configured with (`https`): overwritten by the renewal test. */
  let served = { cert: '', key: '' };

  beforeAll(async () => {
    group = new LocalGroup({
      name: 'https-emit',
      members: MEMBERS,
      agentHosts: [],
      agentPort: AGENT_PORT,
      managerConfig: { plainHttp: false },
      memberConfig: { [PLAIN]: { plainHttp: true } },
    });
    // .211's own HTTPS certificate, a copy in the group's folder so the test may replace it.
    certDir = path.join(group.dir, 'https-certs');
    mkdirSync(certDir, { recursive: true });
    const first = issueCert(testCa(), certDir, { name: 'https-first', role: 'manager', hosts: [hostOf(OWN_CERT)] });
    served = { cert: path.join(certDir, 'served.pem'), key: path.join(certDir, 'served.key') };
    copyFileSync(first.cert, served.cert);
    copyFileSync(first.key, served.key);
    // ManagerProcess wrote its config at construction: write .211's again with `https`.
    const configFile = path.join(group.manager(OWN_CERT).dataDir, 'manager.json');
    writeFileSync(configFile, JSON.stringify({ ...JSON.parse(readFileSync(configFile, 'utf8')), https: served }, null, 2));
    // Starting waits for any envelope: an HTTPS member's answer to plain HTTP is one too.
    await group.start();
    await waitFor('a leader over HTTPS', async () => {
      const flags = await Promise.all(HTTPS_MEMBERS.map((m) => httpsMetric(m, 'kcm_raft_is_leader').catch(() => undefined)));
      const plain = await emitRaw(PLAIN, 'get_meta_mode', {}, { timeoutMs: 2_000 }).catch(() => undefined);
      return flags.includes(1) || plain?.error_code === '0';
    }, 30_000, 200);
  }, 90_000);

  afterAll(async () => {
    await group?.stop();
  }, 30_000);

  it('serves get_meta_mode over HTTPS to a client trusting the cluster CA, on each certificate choice', async () => {
    for (const member of HTTPS_MEMBERS) {
      const reply = await waitFor(`${member} to answer with a leader`, async () => {
        const r = await httpsEmit(member, 'get_meta_mode');
        return r.error_code === '0' ? r : undefined;
      }, 20_000, 200);
      expect(reply.attachment).toMatchObject({ mode: 'mgr' });
    }
    const memberConfig = JSON.parse(readFileSync(path.join(group.manager(MEMBER_CERT).dataDir, 'manager.json'), 'utf8')) as { tls: { cert: string } };
    expect(await servedSerial(MEMBER_CERT)).toBe(serialOf(memberConfig.tls.cert));
    expect(await servedSerial(OWN_CERT)).toBe(serialOf(served.cert));
  });

  it('serves the web console on the same HTTPS listener', async () => {
    const page = await httpsCall(OWN_CERT, '/ui/');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<script type="importmap">');
  });

  it('kcm reaches the group over HTTPS with --ca, passing over a member that refuses its connection', async () => {
    let stdout = '';
    let stderr = '';
    const code = await kcm(['get', 'meta_mode', '--url', `https://127.0.1.214:18450,https://${OWN_CERT},https://${MEMBER_CERT}`, '--ca', testCa().cert, '--token', TEST_TOKENS.viewer], {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
      env: { KCM_CONFIG: '/nonexistent/kcm-config.json', KCM_LOCAL_DIR: '/nonexistent/kcm-local' },
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toContain('mgr');
  });

  it('refuses a client that does not trust the CA, in the TLS handshake', async () => {
    for (const member of HTTPS_MEMBERS) {
      const refused = await httpsCall(member, '/HttpService/Emit', { body: JSON.stringify(requestEnvelope('get_meta_mode')), headers: authHeader(), ca: null }).then(
        () => 'answered',
        (err: NodeJS.ErrnoException) => err.code,
      );
      expect(['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY']).toContain(refused);
    }
  });

  it('answers plain HTTP to an HTTPS port without reading it: no job, and the bearer token it carried is in no log line', async () => {
    for (const member of HTTPS_MEMBERS) {
      const probeId = `plain-http-probe-${randomUUID()}`;
      const body = JSON.stringify({ ...requestEnvelope('create_cluster', { nick_name: probeId }), request_id: probeId });
      const request = [
        'POST /HttpService/Emit HTTP/1.1',
        `Host: ${member}`,
        `Authorization: Bearer ${TEST_TOKENS.admin}`,
        `X-Request-Id: ${probeId}`,
        'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(body)}`,
        'Connection: close',
        '',
        body,
      ].join('\r\n');
      const answer = await plainBytes(hostOf(member), portOf(member), request);
      expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      const reply = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as ReplyEnvelope;
      expect(reply).toMatchObject({ status: 'failed', error_code: '1000', job_id: '' });
      expect(reply.error_info).toContain(`this port serves HTTPS only: send the request to https://${member}`);

      // The same kind of request over HTTPS is logged with its request id: the search below can find what a member logs.
      const seenId = `https-probe-${randomUUID()}`;
      await httpsEmit(member, 'get_meta_mode', { ...authHeader(), 'x-request-id': seenId });
      const log = () => readFileSync(group.manager(member).logFile, 'utf8');
      await waitFor(`${member}'s emit line for ${seenId}`, () => log().includes(seenId), 10_000, 100);
      expect(log()).not.toContain(probeId);
      expect(log()).not.toContain(TEST_TOKENS.admin);
    }
  });

  it('serves Emit over plain HTTP on the member configured plainHttp: true', async () => {
    const reply = await emitRaw(PLAIN, 'get_meta_mode');
    expect(reply).toMatchObject({ error_code: '0', attachment: { mode: 'mgr' } });
    // And no HTTPS there: a TLS client gets no certificate.
    await expect(servedSerial(PLAIN)).rejects.toThrow();
  });

  it('serves a certificate renewed on disk without a restart, and /metrics shows its expiry', async () => {
    const pidBefore = group.manager(OWN_CERT).pid;
    const old = serialOf(served.cert);
    const expiry = `kcm_tls_cert_expiry_timestamp_seconds{member="${OWN_CERT}",use="https"}`;
    expect(await httpsMetric(OWN_CERT, expiry)).toBe(Date.parse(new X509Certificate(readFileSync(served.cert)).validTo) / 1000);

    // Shorter-lived than the first (825 days): its expiry on /metrics differs too.
    const renewed = issueCert(testCa(), certDir, { name: 'https-renewed', role: 'manager', hosts: [hostOf(OWN_CERT)], days: 30 });
    const next = serialOf(renewed.cert);
    expect(next).not.toBe(old);
    writeFileSync(served.key, readFileSync(renewed.key));
    writeFileSync(served.cert, readFileSync(renewed.cert));

    await waitFor('the renewed certificate served', async () => ((await servedSerial(OWN_CERT)) === next ? true : undefined), 30_000, 200);
    expect(group.manager(OWN_CERT).pid).toBe(pidBefore);
    const reloaded = group.manager(OWN_CERT).logLines().find((l) => l.msg === 'HTTPS certificate reloaded');
    expect(reloaded).toMatchObject({ serial: next, previous_serial: old });
    expect(await httpsMetric(OWN_CERT, expiry)).toBe(Date.parse(new X509Certificate(readFileSync(renewed.cert)).validTo) / 1000);
    expect((await httpsEmit(OWN_CERT, 'get_meta_mode')).error_code).toBe('0');
  });
});

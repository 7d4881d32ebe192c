// Closed by default, and credentials before ports: a manager or an agent whose TLS files are
// missing, unreadable or of another CA exits with a message naming the file, and none of its
// ports ever accepted a connection meanwhile. Without TLS files it starts only when told
// `insecure` explicitly, and then warns. (Real processes on 127.0.1.171-172, 127.0.2.171.)

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { testCert } from '../helpers/pki';
import { emitRaw } from '../helpers/emit-client';
import { MANAGER_MAIN, ManagedProcess, REPO_ROOT, sleep, waitFor } from './helpers/processes';

const MEMBER = '127.0.1.171:18470';
const AGENT_HOST = '127.0.2.171';
const AGENT_PORT = 18475;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'kcm-tls-startup-'));
const started: ManagedProcess[] = [];

afterAll(async () => {
  await Promise.all(started.map((p) => p.kill()));
  rmSync(tmp, { recursive: true, force: true });
});

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** Runs the process until it exits (or 30 s), probing its ports all along; the log text and whether a port ever accepted. */
async function runUntilExit(proc: ManagedProcess, ports: Array<[string, number]>): Promise<{ log: string; listened: boolean }> {
  started.push(proc);
  proc.start();
  let listened = false;
  const deadline = Date.now() + 30_000;
  while (proc.running && Date.now() < deadline) {
    for (const [host, port] of ports) if (await accepts(host, port)) listened = true;
    await sleep(20);
  }
  expect(proc.running, `${proc.name} still runs`).toBe(false);
  return { log: readFileSync(proc.logFile, 'utf8'), listened };
}

function manager(name: string, config: Record<string, unknown>, extraArgs: string[] = []): ManagedProcess {
  const configFile = path.join(tmp, `${name}.json`);
  writeFileSync(configFile, JSON.stringify({ member: MEMBER, dataDir: path.join(tmp, name), ...config }));
  return new ManagedProcess(`manager ${name}`, [MANAGER_MAIN, '--config', configFile, ...extraArgs], path.join(tmp, `${name}.log`));
}

const managerPorts: Array<[string, number]> = [['127.0.1.171', 18470], ['127.0.1.171', 18471]];

describe('a manager and an agent load their credentials before any port', () => {
  it('a manager with a missing key file exits naming it, and never listened', async () => {
    const files = testCert('manager', ['127.0.1.171']);
    const missing = path.join(tmp, 'no-such.key');
    const { log, listened } = await runUntilExit(manager('missing-key', { tls: { ...files, key: missing } }), managerPorts);
    expect(log).toContain(`TLS key file ${missing}: cannot read it (ENOENT)`);
    expect(listened).toBe(false);
  });

  it('a manager whose certificate is another CA’s exits naming it, and never listened', async () => {
    const files = { ...testCert('manager', ['127.0.1.171'], 'other'), ca: testCert('manager', ['127.0.1.171']).ca };
    const { log, listened } = await runUntilExit(manager('other-ca', { tls: files }), managerPorts);
    expect(log).toContain(`TLS certificate file ${files.cert} is not signed by a CA of ${files.ca}`);
    expect(listened).toBe(false);
  });

  it('a manager given no TLS files refuses to start unless insecure', async () => {
    const { log, listened } = await runUntilExit(manager('no-tls', {}), managerPorts);
    expect(log).toContain('TLS is required: name the ca, cert, key files');
    expect(listened).toBe(false);
  });

  it('an agent with an agent certificate of another CA exits naming it, and never listened', async () => {
    const files = { ...testCert('agent', [AGENT_HOST], 'other'), ca: testCert('agent', [AGENT_HOST]).ca };
    const agent = new ManagedProcess('agent other-ca', [
      path.join(REPO_ROOT, 'services/agent/src/main.ts'), '--host', AGENT_HOST, '--port', String(AGENT_PORT), '--state-dir', path.join(tmp, 'agent'),
      '--tls-ca', files.ca, '--tls-cert', files.cert, '--tls-key', files.key,
    ], path.join(tmp, 'agent.log'));
    const { log, listened } = await runUntilExit(agent, [[AGENT_HOST, AGENT_PORT]]);
    expect(log).toContain(`TLS certificate file ${files.cert} is not signed by a CA of ${files.ca}`);
    expect(listened).toBe(false);
  });

  it('a manager started with --insecure runs, and warns that it is insecure', async () => {
    const proc = manager('insecure', {}, ['--insecure']);
    started.push(proc);
    proc.start();
    await waitFor('the insecure manager to answer', () => emitRaw(MEMBER, 'get_meta_mode', {}, { timeoutMs: 2_000 }).then(() => true), 45_000, 250);
    // Log lines go out in blocks every 100 ms (libs/common/src/logger.ts): the warning may trail the first answer.
    await waitFor('the insecure warning in the log', async () => readFileSync(proc.logFile, 'utf8').includes('INSECURE: this manager runs without TLS'), 5_000, 50);
    await proc.kill();
  });
});

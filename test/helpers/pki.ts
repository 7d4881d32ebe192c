// The system tests' PKI: one CA per test process, in a temp folder, and certificates issued
// on demand (cached) with the same code `kcm local up` uses (libs/agent-api/src/tls/issue.ts).
// The fixtures (ManagerProcess, AgentProcess, the cluster fixture) call it in one line, so
// every system test runs with mutual TLS on.

import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eachAtMost } from '@kcm/common';
import { certExtensions, ensureCa, issueCert, loadTlsMaterial, useTls, type CaFiles, type TlsFiles, type TlsMaterial, type TlsRole } from '@kcm/agent-api';

let root: string | undefined;
const cas = new Map<string, CaFiles>();

function pkiRoot(): string {
  if (!root) {
    root = mkdtempSync(path.join(os.tmpdir(), 'kcm-pki-'));
    const dir = root;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return root;
}

/** The test process's cluster CA, or another one by name (for "a certificate of another CA"). */
export function testCa(name = 'cluster'): CaFiles {
  let ca = cas.get(name);
  if (!ca) {
    ca = ensureCa(path.join(pkiRoot(), name), `/CN=kcm test CA ${name}`);
    cas.set(name, ca);
  }
  return ca;
}

/** A certificate of `role` naming `hosts`, issued by the named CA (cached by role and hosts). */
export function testCert(role: TlsRole, hosts: readonly string[], caName = 'cluster'): TlsFiles {
  const name = `${role}-${hosts.join('_').replace(/[^A-Za-z0-9._-]/g, '-')}`;
  return issueCert(testCa(caName), path.join(pkiRoot(), caName, 'certs'), { name, role, hosts });
}

const hostOf = (member: string) => member.slice(0, member.lastIndexOf(':'));

/** The `tls` key of a manager's config. */
export function managerTls(member: string): { tls: TlsFiles } {
  return { tls: testCert('manager', [hostOf(member)]) };
}

/** An agent's TLS arguments. */
export function agentTlsArgs(host: string): string[] {
  const files = testCert('agent', [host]);
  return ['--tls-ca', files.ca, '--tls-cert', files.cert, '--tls-key', files.key];
}

/**
 * Mutual TLS for everything in this test process (an in-process manager and agents): one
 * manager-role certificate naming every host they listen on.
 */
export function useTestTls(hosts: readonly string[], role: TlsRole = 'manager'): TlsMaterial {
  const material = loadTlsMaterial(testCert(role, hosts), role);
  useTls(material);
  return material;
}

/** A certificate of `role` under a short file name, for hosts too many to name a file after (the hollow fleet's 1,000). */
export function testCertNamed(role: TlsRole, name: string, hosts: readonly string[]): TlsFiles {
  return issueCert(testCa(), path.join(pkiRoot(), 'cluster', 'certs'), { name, role, hosts });
}

/**
 * A certificate of `role` for each of `hosts`, each naming only its own host, as real agents'
 * do: `<dir>/<host>.pem`, all with the one key `<dir>/hosts.key`. For the hollow fleet: one
 * certificate naming all 1,000 simulated hosts made every TLS handshake parse a 1,000-name
 * list (a few ms each) and kept a copy of it per connection in the manager's heap (24.6 MB),
 * costs no real fleet has. One shared key and parallel signing keep 1,000 certificates to a
 * few seconds.
 */
export async function testCertsPerHost(role: TlsRole, hosts: readonly string[]): Promise<{ ca: string; dir: string; key: string }> {
  const ca = testCa();
  const dir = path.join(pkiRoot(), 'cluster', `per-host-${role}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const key = path.join(dir, 'hosts.key');
  const csr = path.join(dir, 'hosts.csr');
  if (!existsSync(key)) {
    await openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=kcm hollow ${role}/OU=${role}`]);
  }
  let serial = Date.now();
  await eachAtMost(8, hosts.filter((h) => !existsSync(path.join(dir, `${h}.pem`))), async (host) => {
    const ext = path.join(dir, `${host}.ext`);
    writeFileSync(ext, certExtensions(role, [host]));
    await openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', String(serial++), '-days', '30', '-extfile', ext, '-out', path.join(dir, `${host}.pem`)]);
    rmSync(ext, { force: true });
  });
  return { ca: ca.cert, dir, key };
}

function openssl(args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(process.env.KCM_OPENSSL ?? 'openssl', args, (err, _out, stderr) => (err ? reject(new Error(`openssl ${args[0]}: ${stderr || err.message}`)) : resolve())),
  );
}

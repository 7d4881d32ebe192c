// The system tests' PKI: one CA per test process, in a temp folder, and certificates issued
// on demand (cached) with the same code `kcm local up` uses (libs/agent-api/src/tls/issue.ts).
// The fixtures (ManagerProcess, AgentProcess, the cluster fixture) call it in one line, so
// every system test runs with mutual TLS on.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureCa, issueCert, loadTlsMaterial, useTls, type CaFiles, type TlsFiles, type TlsMaterial, type TlsRole } from '@kcm/agent-api';

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

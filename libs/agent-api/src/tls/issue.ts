// Issues a kcm CA and role certificates with Debian's `openssl` (the binary every host
// already has, the same commands deploy/tls/issue-certs.sh documents for a real deployment,
// and no new npm dependency to audit). Used by `kcm local up` and the system tests' PKI.
// Keys are EC P-256, written mode 0600. Everything is reused when already there and valid,
// so a restarted local group keeps its CA.

import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { certNames, issuedByOneOf, parseCertBundle, roleOf, ROLE_URI_PREFIX, type TlsFiles, type TlsRole } from './material';

const OPENSSL = process.env.KCM_OPENSSL ?? 'openssl';
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

function openssl(args: string[]): void {
  execFileSync(OPENSSL, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export interface CaFiles {
  cert: string;
  key: string;
}

/** The CA under `dir` (ca.pem, ca.key), created on first use. */
export function ensureCa(dir: string, subject = '/CN=kcm cluster CA', days = 3650): CaFiles {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = { cert: path.join(dir, 'ca.pem'), key: path.join(dir, 'ca.key') };
  if (existsSync(files.cert) && existsSync(files.key)) return files;
  openssl(['req', '-x509', ...EC, '-keyout', files.key, '-out', files.cert, '-days', String(days), '-subj', subject,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  chmodSync(files.key, 0o600);
  return files;
}

export interface CertRequest {
  /** File stem under the output directory: `<name>.pem`, `<name>.key` (and the subject CN, cut to X.509's 64 characters). */
  name: string;
  role: TlsRole;
  /** IP addresses and DNS names the holder is reached at (its SANs). */
  hosts: readonly string[];
  days?: number;
}

const IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9A-Fa-f:]+)$/;

/** The X.509 extensions of a role certificate (an openssl -extfile): its role as a URI, the hosts as IP or DNS names. */
export function certExtensions(role: TlsRole, hosts: readonly string[]): string {
  const sans = [`URI:${ROLE_URI_PREFIX}${role}`, ...hosts.map((h) => (IP.test(h) ? `IP:${h}` : `DNS:${h}`))];
  return [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth,clientAuth',
    `subjectAltName=${sans.join(',')}`,
    '',
  ].join('\n');
}

/** A certificate of `ca` for req, in `dir`; an existing one is kept when it still fits. */
export function issueCert(ca: CaFiles, dir: string, req: CertRequest): TlsFiles {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const cert = path.join(dir, `${req.name}.pem`);
  const key = path.join(dir, `${req.name}.key`);
  if (existsSync(cert) && existsSync(key) && fits(cert, ca, req)) return { ca: ca.cert, cert, key };
  const csr = path.join(dir, `${req.name}.csr`);
  const ext = path.join(dir, `${req.name}.ext`);
  writeFileSync(ext, certExtensions(req.role, req.hosts));
  try {
    openssl(['req', '-new', ...EC, '-keyout', key, '-out', csr, '-subj', `/CN=${req.name.slice(0, 64)}/OU=${req.role}`]);
    chmodSync(key, 0o600);
    openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', `0x${Date.now().toString(16)}${Math.floor(Math.random() * 1e6).toString(16)}`,
      '-days', String(req.days ?? 825), '-extfile', ext, '-out', cert]);
  } finally {
    rmSync(csr, { force: true });
    rmSync(ext, { force: true });
  }
  return { ca: ca.cert, cert, key };
}

function fits(certFile: string, ca: CaFiles, req: CertRequest): boolean {
  try {
    const cert = new X509Certificate(readFileSync(certFile));
    const cas = parseCertBundle(readFileSync(ca.cert, 'utf8'), ca.cert);
    // A month of validity left, or it is reissued now rather than failing later.
    return issuedByOneOf(cert, cas, Date.now() + 30 * 86400_000) && roleOf(cert) === req.role && req.hosts.every((h) => certNames(cert, h));
  } catch {
    return false;
  }
}

// A process's TLS material: the cluster CA bundle, its own certificate and key, loaded and
// checked before anything listens. Every problem names the file it is about, so a bad path
// or a certificate of another CA fails the start with a message an operator can act on.
//
// The role of a certificate is a SAN URI: `urn:kcm:role:manager` or `urn:kcm:role:agent`
// (a SAN, not the subject OU, so a name constraint or a CA policy can restrict it, and so
// one certificate can also carry the IP/DNS names the peers check).

import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

export type TlsRole = 'manager' | 'agent';
export const TLS_ROLES: readonly TlsRole[] = ['manager', 'agent'];
export const ROLE_URI_PREFIX = 'urn:kcm:role:';

/** The three files named in a manager's config (`tls`) or on an agent's command line. */
export interface TlsFiles {
  /** PEM bundle of trusted CA certificates (old and new together while a CA rotates). */
  ca: string;
  cert: string;
  key: string;
}

export interface TlsMaterial {
  files: TlsFiles;
  caPem: Buffer;
  certPem: Buffer;
  keyPem: Buffer;
  cas: X509Certificate[];
  cert: X509Certificate;
  key: KeyObject;
  role: TlsRole;
}

export class TlsMaterialError extends Error {}

function readPem(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new TlsMaterialError(`TLS ${what} file ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/** The certificates of a PEM bundle, in order. */
export function parseCertBundle(pem: string, file: string, what = 'CA'): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new TlsMaterialError(`TLS ${what} file ${file}: no PEM certificate in it`);
  return blocks.map((block) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new TlsMaterialError(`TLS ${what} file ${file}: a certificate does not parse (${err instanceof Error ? err.message : String(err)})`);
    }
  });
}

/** The kcm role a certificate carries, from its SAN URI; undefined when it carries none. */
export function roleOf(cert: X509Certificate): TlsRole | undefined {
  const uris = (cert.subjectAltName ?? '').split(/,\s*/).filter((s) => s.startsWith('URI:')).map((s) => s.slice(4));
  for (const role of TLS_ROLES) if (uris.includes(`${ROLE_URI_PREFIX}${role}`)) return role;
  return undefined;
}

/** Whether `host` (an IP address or DNS name) is one of the certificate's SAN names. */
export function certNames(cert: X509Certificate, host: string): boolean {
  const names = (cert.subjectAltName ?? '').split(/,\s*/);
  return names.includes(`IP Address:${host}`) || names.includes(`DNS:${host}`);
}

/** Whether one of the CAs issued `cert` (signature checked) and both are valid now. */
export function issuedByOneOf(cert: X509Certificate, cas: readonly X509Certificate[], now = Date.now()): boolean {
  if (!validAt(cert, now)) return false;
  return cas.some((ca) => validAt(ca, now) && cert.checkIssued(ca) && cert.verify(ca.publicKey));
}

function validAt(cert: X509Certificate, now: number): boolean {
  return Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo);
}

/** Reads and checks the files; `role` is the role this process must hold. */
export function loadTlsMaterial(files: TlsFiles, role: TlsRole): TlsMaterial {
  const caPem = readPem(files.ca, 'CA');
  const certPem = readPem(files.cert, 'certificate');
  const keyPem = readPem(files.key, 'key');
  const cas = parseCertBundle(caPem.toString('utf8'), files.ca);
  const [cert] = parseCertBundle(certPem.toString('utf8'), files.cert, 'certificate');
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    throw new TlsMaterialError(`TLS key file ${files.key}: not a PEM private key (${err instanceof Error ? err.message : String(err)})`);
  }
  if (!cert!.checkPrivateKey(key)) throw new TlsMaterialError(`TLS key file ${files.key} does not belong to certificate ${files.cert}`);
  if (!issuedByOneOf(cert!, cas)) {
    throw new TlsMaterialError(`TLS certificate file ${files.cert} is not signed by a CA of ${files.ca}, or it or the CA is outside its validity dates`);
  }
  const held = roleOf(cert!);
  if (held !== role) {
    throw new TlsMaterialError(`TLS certificate file ${files.cert} carries role ${held ?? '(none)'}; a ${role} needs a certificate with SAN URI ${ROLE_URI_PREFIX}${role}`);
  }
  return { files, caPem, certPem, keyPem, cas, cert: cert!, key, role };
}

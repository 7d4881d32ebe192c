// Loading TLS material: every problem names its file; a CA bundle holding old and new CAs
// (the rotation's middle step) accepts certificates of both; insecure is explicit only.

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadTlsMaterial, startTls } from '@kcm/agent-api';
import { testCa, testCert } from '../../../test/helpers/pki';

describe('TLS material', () => {
  it('loads a manager certificate of the CA with its role', () => {
    expect(loadTlsMaterial(testCert('manager', ['127.0.1.1']), 'manager').role).toBe('manager');
  });

  it('issues a certificate naming many hosts (its subject name cut to the 64 characters X.509 allows)', () => {
    const hosts = ['127.0.0.11', '127.0.0.12', '127.0.0.13', '127.0.0.14', '127.0.0.15', '127.0.0.16'];
    const material = loadTlsMaterial(testCert('manager', hosts), 'manager');
    for (const host of hosts) expect(material.cert.subjectAltName).toContain(`IP Address:${host}`);
  });

  it('refuses a certificate of the wrong role, naming the file', () => {
    const files = testCert('agent', ['127.0.2.1']);
    expect(() => loadTlsMaterial(files, 'manager')).toThrow(`TLS certificate file ${files.cert} carries role agent`);
  });

  it('refuses a key that belongs to another certificate', () => {
    const files = { ...testCert('manager', ['127.0.1.1']), key: testCert('manager', ['127.0.1.2']).key };
    expect(() => loadTlsMaterial(files, 'manager')).toThrow(`TLS key file ${files.key} does not belong to certificate ${files.cert}`);
  });

  it('accepts certificates of both CAs while the bundle holds old and new', () => {
    const oldCa = testCa('cluster');
    const newCa = testCa('rotated');
    const bundle = path.join(path.dirname(newCa.cert), 'bundle.pem');
    writeFileSync(bundle, readFileSync(oldCa.cert, 'utf8') + readFileSync(newCa.cert, 'utf8'));
    expect(loadTlsMaterial({ ...testCert('manager', ['127.0.1.1'], 'cluster'), ca: bundle }, 'manager').cas).toHaveLength(2);
    expect(loadTlsMaterial({ ...testCert('manager', ['127.0.1.1'], 'rotated'), ca: bundle }, 'manager').role).toBe('manager');
    expect(() => loadTlsMaterial({ ...testCert('manager', ['127.0.1.1'], 'rotated'), ca: oldCa.cert }, 'manager')).toThrow('is not signed by a CA of');
  });

  it('is required unless insecure is explicit, and never both', () => {
    const warnings: string[] = [];
    const warn = (m: string) => warnings.push(m);
    expect(() => startTls({ role: 'agent', files: {}, insecure: false, warn })).toThrow('TLS is required: name the ca, cert, key files');
    expect(() => startTls({ role: 'agent', files: testCert('agent', ['127.0.2.1']), insecure: true, warn })).toThrow('insecure is set together with TLS files');
    expect(startTls({ role: 'agent', files: undefined, insecure: true, warn })).toBeUndefined();
    expect(warnings).toEqual([expect.stringContaining('INSECURE')]);
  });
});

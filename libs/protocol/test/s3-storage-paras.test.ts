// create_backup_storage's stype s3 paras (paras/s3-storage-fields.ts): each format refused
// naming its field; a refused secret is not quoted back.

import { describe, expect, it } from 'vitest';
import { parseRequest } from '../src/index';

const GOOD = {
  name: 'bucket', stype: 's3', hostaddr: '127.0.2.1', port: '58150', path: '/var/lib/kcm/s3-spool',
  endpoint: 'http://127.0.5.1:9000', bucket: 'kcm-backups', prefix: 'prod/kcm', region: 'eu-west-1', access_key_id: 'AKIAEXAMPLE', secret_access_key: 'wJalrXUtnFEMI/K7MDENG',
};
const parse = (paras: Record<string, unknown>) => parseRequest({ version: '1.0', job_id: '', job_type: 'create_backup_storage', timestamp: '1700000000', user_name: 'kcm', paras });

describe('create_backup_storage stype s3 paras', () => {
  it('a whole set is accepted', () => {
    const r = parse(GOOD);
    expect(r.ok, r.ok ? '' : r.error.message).toBe(true);
  });

  const bad: [string, unknown, RegExp][] = [
    ['endpoint', 'ftp://host', /http:\/\/ or https:\/\//],
    ['endpoint', 'http://host/path', /no path/],
    ['endpoint', 'http://user:pw@host', /must not carry credentials/],
    ['bucket', 'ab', /3-63/],
    ['bucket', 'Upper_Case', /lowercase/],
    ['bucket', 'a..b', /\.\./],
    ['bucket', '192.168.1.1', /IP address/],
    ['prefix', '/leading', /no leading or trailing/],
    ['prefix', 'a//b', /none empty/],
    ['region', 'EU WEST', /a-z0-9-/],
    ['access_key_id', 'has space', /no spaces/],
  ];
  for (const [field, value, rule] of bad) {
    it(`${field} ${JSON.stringify(value)} is refused naming paras.${field}`, () => {
      const r = parse({ ...GOOD, [field]: value });
      if (r.ok) throw new Error('accepted');
      expect(r.error.field).toBe(`paras.${field}`);
      expect(r.error.message).toMatch(rule);
    });
  }

  it('a refused secret key is not quoted in the error', () => {
    const r = parse({ ...GOOD, secret_access_key: 'has a space in it' });
    if (r.ok) throw new Error('accepted');
    expect(r.error.field).toBe('paras.secret_access_key');
    expect(r.error.message).not.toContain('has a space in it');
  });
});

// What kcm writes into a compute instance's data directory, and what it refuses to write.

import { describe, expect, it } from 'vitest';
import { kcmConf, pgHbaConf, validateVariables, variablesConf } from '../../src/capabilities/postgres/config';
import { instanceDatadir, validateIdentifier, type PostgresInstance } from '../../src/capabilities/postgres/layout';
import { scramSha256Verifier } from '../../src/capabilities/postgres/scram';

const instance: PostgresInstance = { port: 56301, hostaddr: '127.0.2.1', datadir: '/data/comp/56301', user: 'app', variables: {}, catalogDatabases: [] };

describe('compute instance configuration', () => {
  it('binds the host address and port, with the socket inside the data dir and scram passwords', () => {
    const conf = kcmConf(instance);
    expect(conf).toContain("listen_addresses = '127.0.2.1'");
    expect(conf).toContain("port = '56301'");
    expect(conf).toContain("unix_socket_directories = '/data/comp/56301'");
    expect(conf).toContain("password_encryption = 'scram-sha-256'");
    expect(conf).toContain("log_min_error_statement = 'panic'");
  });

  it('lets only the socket peer be the superuser; everyone else needs scram-sha-256 over TCP', () => {
    const lines = pgHbaConf().split('\n').filter((l) => l && !l.startsWith('#'));
    expect(lines).toEqual([
      'local all postgres peer map=kcm_admin',
      'host all postgres 0.0.0.0/0 reject',
      'host all postgres ::/0 reject',
      'host all all 0.0.0.0/0 scram-sha-256',
      'host all all ::/0 scram-sha-256',
    ]);
  });

  it('quotes variable values and refuses settings kcm owns, bad names and multi-line values', () => {
    expect(variablesConf({ search_path: "a, 'b'" })).toContain("search_path = 'a, ''b'''");
    expect(() => validateVariables({ listen_addresses: '*' })).toThrow(/managed by kcm/);
    expect(() => validateVariables({ 'x; drop': '1' })).toThrow(/not valid/);
    expect(() => validateVariables({ work_mem: '1MB\ninclude /etc/passwd' })).toThrow(/one line/);
  });

  it('puts the instance in <comp_datadir>/<port> and refuses relative dirs and over-long socket paths', () => {
    expect(instanceDatadir('/data/comp', 56301)).toBe('/data/comp/56301');
    expect(() => instanceDatadir('data/comp', 56301)).toThrow(/absolute/);
    expect(() => instanceDatadir('/data/../etc', 56301)).toThrow(/normalised/);
    expect(() => instanceDatadir(`/${'x'.repeat(100)}`, 56301)).toThrow(/socket path/);
  });

  it('accepts plain identifiers only', () => {
    expect(validateIdentifier('user', 'app_user')).toBe('app_user');
    expect(() => validateIdentifier('user', 'app"; DROP ROLE x; --')).toThrow(/not a valid identifier/);
  });

  it('stores SCRAM-SHA-256 verifiers in the form pg_authid keeps, never the password', () => {
    const v = scramSha256Verifier('pencil', Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64'));
    expect(v).toMatch(/^SCRAM-SHA-256\$4096:W22ZaJ0SNY7soEsUEjb6gQ==\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/);
    expect(v).not.toContain('pencil');
    expect(scramSha256Verifier('pencil')).not.toBe(scramSha256Verifier('pencil')); // a fresh salt each time
  });
});

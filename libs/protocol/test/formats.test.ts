import { describe, expect, it } from 'vitest';
import {
  parseBackupWindow,
  parseDbTable,
  parseInteger,
  parsePeer,
  parsePortRange,
  parseRepartitionPairs,
  parseRestoreTime,
} from '../src/formats';

const value = <T>(r: { ok: true; value: T } | { ok: false; rule: string }) => (r.ok ? r.value : undefined);

describe('shared field formats', () => {
  it('integers: decimal digits only, no sign, fraction, exponent, padding or blank', () => {
    expect(value(parseInteger('42', 0))).toBe(42);
    expect(value(parseInteger('0', 0))).toBe(0);
    for (const s of ['', 'abc', '1.5', '-1', '+1', '1e3', ' 1', '01', '0x10', '99999999999999999999']) {
      expect(parseInteger(s, 0).ok, s).toBe(false);
    }
  });

  it('port_range: low-high with 1024 <= low < high <= 65535', () => {
    expect(value(parsePortRange('1024-65535'))).toEqual({ low: 1024, high: 65535 });
    for (const s of ['1023-2000', '2000-2000', '3000-2000', '2000-65536', '2000', '2000-', 'a-b', '2000 - 3000']) {
      expect(parsePortRange(s).ok, s).toBe(false);
    }
  });

  it('peers: <host>:<port> with IPv4, DNS name or bracketed IPv6', () => {
    expect(value(parsePeer('127.0.1.2:58001'))).toEqual({ host: '127.0.1.2', port: 58001 });
    expect(value(parsePeer('[fd00::1]:58001'))).toEqual({ host: 'fd00::1', port: 58001 });
    expect(value(parsePeer('manager-1.kcm.local:58001'))).toEqual({ host: 'manager-1.kcm.local', port: 58001 });
    for (const s of ['127.0.1.2', ':58001', 'fd00::1:58001', '[127.0.0.1]:1', 'host:0', 'host:65536', 'bad_host:1', '-a:1']) {
      expect(parsePeer(s).ok, s).toBe(false);
    }
  });

  it('db_table shapes follow the object type (spec 2.6)', () => {
    expect(value(parseDbTable('table', 'postgres_$$_public.t1'))).toEqual({ database: 'postgres', schema: 'public', table: 't1' });
    expect(value(parseDbTable('schema', 'my_db_$$_public'))).toEqual({ database: 'my_db', schema: 'public' });
    expect(value(parseDbTable('db', 'postgres'))).toEqual({ database: 'postgres' });
    expect(parseDbTable('table', 'postgres_$$_public').ok).toBe(false);
    expect(parseDbTable('schema', 'postgres_$$_public.t1').ok).toBe(false);
    expect(parseDbTable('db', 'postgres_$$_public').ok).toBe(false);
    expect(parseDbTable('table', 'a_$$_b_$$_c.t').ok).toBe(false);
    expect(parseDbTable('table', 'a_$$_b.t;drop').ok).toBe(false);
    expect(parseDbTable('table', '_$$_b.t').ok).toBe(false);
  });

  it('backup windows: HH:MM:SS-HH:MM:SS, may cross midnight, never empty', () => {
    expect(value(parseBackupWindow('23:00:00-01:30:00'))).toEqual({ startSecond: 82800, endSecond: 5400 });
    for (const s of ['01:00:00-01:00:00', '24:00:00-01:00:00', '1:00:00-02:00:00', '01:00:00', '01:00:60-02:00:00', '01:00:00-02:00:00-03:00:00']) {
      expect(parseBackupWindow(s).ok, s).toBe(false);
    }
  });

  it('restore times: real calendar dates in the given time zone, or Unix seconds', () => {
    const utc = () => 0;
    expect(value(parseRestoreTime('2024-02-29 12:00:00', utc))).toBe(Date.UTC(2024, 1, 29, 12) / 1000);
    expect(value(parseRestoreTime('2024-02-29 12:00:00', () => -120))).toBe(Date.UTC(2024, 1, 29, 10) / 1000);
    expect(value(parseRestoreTime('1700000000'))).toBe(1700000000);
    for (const s of ['2023-02-29 12:00:00', '2024-04-31 00:00:00', '2024-00-10 00:00:00', '2024-01-01 23:60:00', '2024-01-01', '0', '-5', '1700000000.5', '1969-12-31 23:59:59']) {
      expect(parseRestoreTime(s).ok, s).toBe(false);
    }
  });

  it('repartition pairs: every item src=>dst in table shape, all sources in one database, none twice', () => {
    expect(value(parseRepartitionPairs('a_$$_s.t1=>b_$$_s.t1, a_$$_s.t2=>c_$$_x.t2'))).toEqual([
      { source: { database: 'a', schema: 's', table: 't1' }, target: { database: 'b', schema: 's', table: 't1' } },
      { source: { database: 'a', schema: 's', table: 't2' }, target: { database: 'c', schema: 'x', table: 't2' } },
    ]);
    expect(parseRepartitionPairs('a_$$_s.t1=>b_$$_s.t1,a_$$_s.t1=>b_$$_s.t2').ok).toBe(false);
    expect(parseRepartitionPairs('a_$$_s.t1=>b_$$_s.t1,').ok).toBe(false);
    expect(parseRepartitionPairs('a_$$_s.t1=>b_$$_s.t1=>c_$$_s.t1').ok).toBe(false);
  });
});

// The drill's comparison and the GTID position check of a held backup source, as pure functions.

import { describe, expect, it } from 'vitest';
import { compareTableChecksums } from '../../src/jobs/restore-drill/compare';
import { sameGtidPos } from '../../src/jobs/restore-drill/held-source';

const t = (table: string, rows: number, checksum: string) => ({ database: 'shop', table, rows, checksum });

describe('compareTableChecksums', () => {
  it('finds no difference when every table has the recorded rows and checksum', () => {
    expect(compareTableChecksums([t('a', 3, '11'), t('b', 0, '0')], [t('b', 0, '0'), t('a', 3, '11')])).toEqual([]);
  });

  it('names a table whose row count, or only its checksum, differs', () => {
    expect(compareTableChecksums([t('a', 3, '11'), t('b', 2, '22')], [t('a', 2, '11'), t('b', 2, '23')])).toEqual([
      { table: 'shop.a', what: '2 rows restored, 3 recorded' },
      { table: 'shop.b', what: 'checksum 23 restored, 22 recorded' },
    ]);
  });

  it('names a table missing from the restored copy and one that was never recorded', () => {
    expect(compareTableChecksums([t('a', 1, '1')], [t('c', 1, '1')])).toEqual([
      { table: 'shop.a', what: 'missing from the restored copy' },
      { table: 'shop.c', what: 'in the restored copy, not recorded at backup time' },
    ]);
  });
});

describe('sameGtidPos', () => {
  it('compares positions whatever the order of their domains', () => {
    expect(sameGtidPos('0-1-42,1-2-7', '1-2-7,0-1-42')).toBe(true);
    expect(sameGtidPos('0-1-42', '0-1-41')).toBe(false);
    expect(sameGtidPos('', '')).toBe(true);
  });
});

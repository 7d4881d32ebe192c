// A restore drill's verdict (docs/backup-policies.md, "Restore drills"): the restored copy's
// tables against the figures recorded when the set was taken. A table is compared by its row
// count and CHECKSUM TABLE; a table missing on either side is a difference too.

import type { TableChecksumRecord } from '../../meta/state';

export interface TableDifference {
  /** `database.table`. */
  table: string;
  /** What differs, in words a report can show. */
  what: string;
}

const nameOf = (t: Pick<TableChecksumRecord, 'database' | 'table'>) => `${t.database}.${t.table}`;

/** Every difference between what was recorded and what the restored copy holds; [] when they agree. */
export function compareTableChecksums(recorded: readonly TableChecksumRecord[], restored: readonly TableChecksumRecord[]): TableDifference[] {
  const found = new Map(restored.map((t) => [nameOf(t), t]));
  const differences: TableDifference[] = [];
  for (const want of recorded) {
    const name = nameOf(want);
    const got = found.get(name);
    found.delete(name);
    if (!got) differences.push({ table: name, what: 'missing from the restored copy' });
    else if (got.rows !== want.rows) differences.push({ table: name, what: `${got.rows} rows restored, ${want.rows} recorded` });
    else if (got.checksum !== want.checksum) differences.push({ table: name, what: `checksum ${got.checksum || '(none)'} restored, ${want.checksum || '(none)'} recorded` });
  }
  for (const name of found.keys()) differences.push({ table: name, what: 'in the restored copy, not recorded at backup time' });
  return differences;
}

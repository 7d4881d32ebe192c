// A backup's position and size when its bytes never pass through the agent (a source that
// pipes mariabackup straight into zstd, backup-compression.ts).
//
// Position: `mariabackup --extra-lsndir=<dir>` writes its info file there as well as into
// the stream. Its `binlog_pos` line is built from the same string as the stream's
// binlog-info file (both from SHOW MASTER STATUS and @@gtid_current_pos under the backup
// lock), so its GTID is the one gtidOfBackup reads from the stream: on a standby (the usual
// source, log_slave_updates on) that is the replicated position a restore replays from,
// the same value as the slave-info file's gtid_slave_pos. Shown on a real standby by
// test/cluster/backup.test.ts.
//
// Size: `zstd -vv` ends with a summary line giving both sizes in exact bytes
// (`/*stdin*\ : 65.63%   (335544320 B => 220200960 B, /*stdout*\)`).

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { isGtidPosText } from '@kcm/agent-api';

/** mariabackup's info file: 10.11 writes `xtrabackup_info`, later versions `mariadb_backup_info`. */
export const BACKUP_INFO_FILES = ['mariadb_backup_info', 'xtrabackup_info'] as const;

const BINLOG_POS = /^binlog_pos\s*=.*GTID of the last change '([^']*)'/m;

/**
 * The GTID position an info file records: '' when the shard never committed a transaction,
 * undefined when the file names none (binary log off, or a format not understood), which
 * makes the backup unusable for a restore.
 */
export function gtidOfBackupInfo(info: string): string | undefined {
  const match = BINLOG_POS.exec(info);
  if (!match) return undefined;
  if (isGtidPosText(match[1])) return match[1];
  return undefined;
}

/** The info file mariabackup left in `dir`, or '' when there is none. */
export async function readBackupInfo(dir: string): Promise<string> {
  for (const name of BACKUP_INFO_FILES) {
    const text = await readFile(path.join(dir, name), 'utf8').catch(() => '');
    if (text) return text;
  }
  return '';
}

/** The uncompressed size from `zstd -vv`'s stderr, or undefined when its summary line is not there. */
export function rawBytesOfZstdSummary(stderr: string): number | undefined {
  const match = /\(\s*(\d+) B =>\s*(\d+) B, /.exec(stderr);
  if (!match) return undefined;
  const raw = Number(match[1]);
  return Number.isSafeInteger(raw) ? raw : undefined;
}

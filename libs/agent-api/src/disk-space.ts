// Free disk space, both sides of the wire: how much an install needs before it starts (the
// agent refuses below it, placement counts it), and the one wording of a full disk, so every
// failure a full disk causes names the directory and its free bytes the same way
// (issue 35: a full datadir showed up as `write EPIPE` or `mariadb-install-db exited with 1`).

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/**
 * Free space a new instance needs in each of its directories before its install starts:
 * what the engine's initialisation writes plus room to start and take its first writes.
 * Measured: mariadb-install-db writes ~18 MB of data files and the whole redo log
 * (innodb_log_file_size, in wal_log_dir); initdb writes ~40 MB and its first WAL segments.
 */
export const INSTALL_MIN_FREE_BYTES = {
  storageDatadir: 64 * MiB,
  storageLogdir: 16 * MiB,
  /** Beside the redo log (storageWalDirNeed). */
  storageWalDir: 64 * MiB,
  computeDatadir: 128 * MiB,
} as const;

/** What a storage node's wal_log_dir needs: its redo log plus room for binlogs. */
export function storageWalDirNeed(redoLogBytes: number): number {
  return redoLogBytes + INSTALL_MIN_FREE_BYTES.storageWalDir;
}

/** Bytes as an operator reads them: `312 MB`, `1.1 GB`. */
export function formatBytes(bytes: number): string {
  if (bytes >= GiB) return `${(bytes / GiB).toFixed(1)} GB`;
  return `${Math.floor(bytes / MiB)} MB`;
}

/**
 * The wording of a full (or nearly full) disk: the role of the directory, its path, the
 * host, and what is free against what the work needs.
 */
export function diskFullMessage(what: string, dir: string, hostaddr: string | undefined, freeBytes: number, neededBytes?: number): string {
  const need = neededBytes === undefined ? '' : `, ${formatBytes(neededBytes)} needed`;
  const on = hostaddr === undefined ? '' : ` on ${hostaddr}`;
  return `not enough disk space: ${what} ${dir}${on} has ${formatBytes(freeBytes)} free (${freeBytes} bytes)${need}`;
}

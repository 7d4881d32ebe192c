// Files and directories kcm makes are its owner's only: managers and agents run with umask
// 077 from their first line, and make their top directories 0700 explicitly, so a file a
// library creates with its own default mode (LevelDB's 0644) is still out of other users'
// reach. Directories that database engines (mysql, postgres) must pass through are made
// traversable-only (0711) where they are created, never listable.

import { chmodSync, mkdirSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';

export const OWNER_ONLY_UMASK = 0o077;

/** Call first in a process's main: every file and directory it creates is owner-only. */
export function useOwnerOnlyUmask(): void {
  process.umask(OWNER_ONLY_UMASK);
}

/** `dir` (and any parent it makes) exists with mode 0700. */
export function makePrivateDirSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * `dir` exists; it and every directory made for it get `mode` whatever the umask (e.g.
 * 0711 for a path mysql or postgres must traverse to their own directories).
 */
export async function makeDirWithMode(dir: string, mode: number): Promise<void> {
  const first = await mkdir(dir, { recursive: true });
  if (first === undefined) return;
  for (let d = dir; ; d = path.dirname(d)) {
    await chmod(d, mode);
    if (d === first || d === path.dirname(d)) break;
  }
}

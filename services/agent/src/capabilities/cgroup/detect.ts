// Finds the cpu controller: cgroup v2 when the unified hierarchy offers `cpu`, else the
// v1 hierarchy that has `cpu` among its mount options. Hybrid hosts (v1 controllers plus
// an empty /sys/fs/cgroup/unified) are v1 for CPU purposes.

import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface CpuHierarchy {
  version: 'v1' | 'v2';
  /** Mount point of the hierarchy that holds the cpu controller. */
  root: string;
}

interface MountEntry {
  dir: string;
  type: string;
  options: string[];
}

/** Parses /proc/mounts (octal escapes such as \040 in paths are decoded). */
export function parseMounts(text: string): MountEntry[] {
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [, dir, type, opts] = line.split(' ');
      return { dir: unescape(dir), type, options: (opts ?? '').split(',') };
    });
}

async function readOr(file: string, fallback: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return fallback;
  }
}

/** The cpu hierarchy described by this mount table; a v2 mount counts only if its root offers `cpu`. */
export async function findCpuHierarchy(mountsText: string): Promise<CpuHierarchy | undefined> {
  const mounts = parseMounts(mountsText);
  for (const m of mounts.filter((m) => m.type === 'cgroup2')) {
    const controllers = (await readOr(path.join(m.dir, 'cgroup.controllers'), '')).trim().split(/\s+/);
    if (controllers.includes('cpu')) return { version: 'v2', root: m.dir };
  }
  const v1 = mounts.find((m) => m.type === 'cgroup' && m.options.includes('cpu'));
  return v1 ? { version: 'v1', root: v1.dir } : undefined;
}

export async function detectCpuHierarchy(): Promise<CpuHierarchy | undefined> {
  return findCpuHierarchy(await readOr('/proc/mounts', ''));
}

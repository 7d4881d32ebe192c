// Host facts: what the manager needs to place instances on this machine.

import { access } from 'node:fs/promises';
import os from 'node:os';
import type { HostFactsReply } from '@kcm/agent-api';
import { freeBytes } from '../ops/disk-space';

/** Where Debian's packages put the engines; overridable for other layouts. */
export interface EnginePaths {
  mariadbd: string;
  postgres: string;
}

export const debianEnginePaths: EnginePaths = {
  mariadbd: '/usr/sbin/mariadbd',
  postgres: '/usr/lib/postgresql/15/bin/postgres',
};

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}

export async function hostFacts(dirs: string[], engines: EnginePaths = debianEnginePaths): Promise<HostFactsReply> {
  const disks = await Promise.all(dirs.map(async (dir) => ({ dir, free_bytes: await freeBytes(dir) })));
  return {
    cores: os.availableParallelism(),
    memory_mb: Math.floor(os.totalmem() / (1024 * 1024)),
    disks,
    mariadb_installed: await exists(engines.mariadbd),
    postgres_installed: await exists(engines.postgres),
  };
}

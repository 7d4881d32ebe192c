import { readFileSync, statfsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Two projects in one run:
// - unit: pure and in-process tests beside each package, run in parallel;
// - system: real processes and real engines (test/, the agent's engine tests), one file
//   at a time, because they time elections and failovers and share the 2-core machine.
// Benchmarks and soaks (bench/, any soak/ folder) never run here.
const systemTests = ['test/**/*.test.ts', 'services/agent/test/{mariadb,postgres,cgroup}/**/*.test.ts'];

/**
 * Where system tests make their temporary folders (TMPDIR): /dev/shm when it is a tmpfs with
 * room, unless KCM_TEST_TMPDIR names another. Every MariaDB commit fsyncs twice
 * (sync_binlog=1, innodb_flush_log_at_trx_commit=1) and initdb and mariadb-install-db sync
 * their whole data directory; on a disk that is most of what an install or a steady load
 * costs. No test crashes the machine itself, and a SIGKILLed process loses nothing it wrote
 * either way, so what a test shows does not depend on the fsyncs reaching a disk.
 */
function systemTmpdir(): string | undefined {
  if (process.env.KCM_TEST_TMPDIR) return process.env.KCM_TEST_TMPDIR;
  try {
    const tmpfs = readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => /^\S+ \/dev\/shm tmpfs /.test(l));
    const fs = statfsSync('/dev/shm');
    return tmpfs && fs.bavail * fs.bsize >= 8 * 2 ** 30 ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}
const tmpdir = systemTmpdir();

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One fork per core (vitest's default leaves one core to itself, so a 2-core machine ran
    // the unit files one at a time while the main process idled). The system project stays
    // serial: fileParallelism false holds it to one fork.
    maxWorkers: Math.max(2, availableParallelism()),
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['libs/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts'],
          exclude: ['**/node_modules/**', '**/soak/**', ...systemTests],
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: systemTests,
          exclude: ['**/node_modules/**', '**/soak/**'],
          fileParallelism: false,
          env: tmpdir ? { TMPDIR: tmpdir } : {},
        },
      },
    ],
  },
});

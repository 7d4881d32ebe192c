import { defineConfig } from 'vitest/config';

// Two projects in one run:
// - unit: pure and in-process tests beside each package, run in parallel;
// - system: real processes and real engines (test/, the agent's engine tests), one file
//   at a time, because they time elections and failovers and share the 2-core machine.
// Benchmarks and soaks (bench/, any soak/ folder) never run here.
const systemTests = ['test/**/*.test.ts', 'services/agent/test/{mariadb,postgres,cgroup}/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
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
        },
      },
    ],
  },
});

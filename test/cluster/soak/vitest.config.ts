// The table-move soaks (npm run soak:move): real processes and engines, run alone under the
// system-test lock, never part of the default suite.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { include: ['test/cluster/soak/**/*.test.ts'], testTimeout: 600_000, hookTimeout: 600_000, pool: 'forks', fileParallelism: false },
});

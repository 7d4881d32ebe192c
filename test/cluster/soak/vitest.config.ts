// Soaks of test/cluster/soak (npm run soak:rotate, soak:move, soak:bank): real engines, minutes each, never part
// of the default suite (the root config excludes every soak/ folder).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('../../..', import.meta.url)),
  test: {
    include: ['test/cluster/soak/**/*.test.ts'],
    testTimeout: 900_000,
    hookTimeout: 400_000,
    pool: 'forks',
    fileParallelism: false,
  },
});

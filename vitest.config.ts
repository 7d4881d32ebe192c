import { defineConfig } from 'vitest/config';

// One config for the whole repository: unit tests live beside each package,
// cross-process tests under test/. Benchmarks and soaks never run here.
export default defineConfig({
  test: {
    include: ['libs/*/test/**/*.test.ts', 'services/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'bench/**', '**/soak/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});

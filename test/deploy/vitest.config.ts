import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// `npm run test:deploy`: the container image and the npm package, built, installed and run. Slow
// (images, installs), so apart from `npm test`; one file at a time, each already loads both cores.
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/deploy/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 1_800_000,
  },
});

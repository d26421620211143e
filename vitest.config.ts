import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'web/src/**/*.test.ts'],
    // The container and package tests build an image and install packages: `npm run test:deploy`.
    exclude: [...configDefaults.exclude, 'test/deploy/**'],
    pool: 'forks',
    // As `npm start` runs keyrelay: src/cli/memory.ts's idle collection needs V8's gc().
    execArgv: ['--expose-gc'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The console's reads run on a thread at nice 19 (src/store/store-thread.ts): behind the other test
    // file's work on a loaded machine, a read the page waits for took more than the default second.
    expect: { poll: { timeout: 10_000 } },
    // 2 cores: integration tests start servers; two files at a time keeps timing stable.
    maxWorkers: 2,
  },
});

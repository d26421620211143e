/**
 * What a cold start of the SQLite log writer's worker costs (docs/performance.md, "Second pass: stream first
 * byte"): CPU of the whole process from `new Worker` until it has answered an empty batch, against an empty
 * worker and one that only imports log-store.js. Run pinned, as keyrelay is in the bench, after a build:
 *   npm run build && taskset -c 1 npx tsx bench/writer-start.ts
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { ROOT } from './keyrelay.js';

const dir = mkdtempSync(join(tmpdir(), 'keyrelay-writer-start-'));
execFileSync(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'migrate'], {
  env: { ...process.env, KEYRELAY_DATA_DIR: dir, KEYRELAY_LOG_LEVEL: 'warn' },
});
const limits = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 64 };
// keyrelay runs from dist/ on plain node: this script's tsx loader must not load in the workers too.
const execArgv: string[] = [];
const logStore = new URL(`file://${join(ROOT, 'dist/src/store/sqlite/log-store.js')}`).href;
const cases: [string, () => Worker][] = [
  [
    'empty worker',
    () =>
      new Worker("require('node:worker_threads').parentPort.postMessage(0)", {
        eval: true,
        resourceLimits: limits,
      }),
  ],
  [
    'worker importing log-store.js',
    () =>
      new Worker(
        `import(${JSON.stringify(logStore)}).then(() => require('node:worker_threads').parentPort.postMessage(0))`,
        { eval: true, resourceLimits: limits, execArgv },
      ),
  ],
  [
    'log writer worker, empty batch written',
    () => {
      const w = new Worker(new URL(`file://${join(ROOT, 'dist/src/store/sqlite/log-store-worker.js')}`), {
        workerData: { path: join(dir, 'requests.db'), options: {} },
        resourceLimits: limits,
        execArgv,
      });
      w.postMessage({ id: 1, method: 'insertEncoded', args: [[], 0] });
      return w;
    },
  ],
];
for (const [name, start] of cases) {
  const cpu: number[] = [];
  const sync: number[] = [];
  for (let i = 0; i < 7; i += 1) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const w = start();
    sync.push(performance.now() - t0);
    await new Promise((resolve) => w.once('message', resolve));
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    await w.terminate();
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  console.log(
    `${name}: ${med(cpu).toFixed(1)} ms CPU (all threads, median of 7), ${med(sync).toFixed(2)} ms of it in new Worker() on the caller`,
  );
}
rmSync(dir, { recursive: true, force: true });

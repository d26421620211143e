/**
 * Worker thread that owns one SQLite connection to the request log (store-thread.ts): the log writer's, or
 * the one the server queries through (log-thread.ts). Messages name a method of SqliteLogStore.
 */
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { SqliteLogStore } from './log-store.js';
import type { Reply, WorkerStoreOptions } from './store-thread.js';

/**
 * How much lower than the event loop this thread runs (a nice value). It shares a core with the proxy: a
 * batch of 500 rows is ~8 ms of CPU, and at equal priority a request arriving meanwhile waited for the
 * scheduler's slice to end, which put the writer's bursts in the proxy's p99. At 5 the kernel weighs this
 * thread at a third of the loop: a waking request is run first, and under saturation the writer still gets
 * ~25 % of the core, over the ~10 % it needs to keep up (a row is ~15 µs; the proxy tops out near 7,000 rows
 * a second), so the queue does not grow. A console query on the reader thread yields the same way.
 */
const STORE_THREAD_NICE = 5;

// On Linux a nice value belongs to a thread (setpriority(2), under BUGS: NPTL threads each have their own),
// so this lowers this worker alone. Elsewhere it would lower the whole process: left alone there.
if (process.platform === 'linux') {
  try {
    // Relative to the thread that started it, which may already run niced: 19 is the lowest there is.
    setPriority(Math.min(19, getPriority() + STORE_THREAD_NICE));
  } catch {
    // Lowering one's own priority is always permitted; should a sandbox refuse it, the thread runs as before.
  }
}

const { path, options } = workerData as { path: string; options: WorkerStoreOptions };
const store = new SqliteLogStore(path, options);
const port = parentPort!;

/** What a caller may ask for: the store's queries and writes. Opening, migrating and closing are not calls. */
const CALLS = new Set<string>([
  'insertBatch',
  'insertEncoded',
  'listRequests',
  'getRequest',
  'listRecent',
  'usageSeries',
  'usageBreakdown',
  'usageTop',
  'usageSeriesSplit',
  'listSessions',
  'sessionCalls',
  'pricingGaps',
  'loggedCosts',
  'prune',
  'count',
  'spendSince',
  'addSpend',
  'fillUsageRollup',
  'upsertBatch',
  'batchByOutputFile',
  'claimBatchResults',
  'listBatches',
]);

/**
 * A log writer's batch is one transaction: the queue hands over what it holds, up to
 * LOG_QUEUE_OPTIONS.batchSize rows (500). Each commit costs a WAL append, the last page of every index
 * rewritten and a new full-text segment that later merges cost again, whatever its size: measured per row
 * on a 300,000-row log (the bench's rows, one core), 17.0 µs in transactions of 100, 15.2 µs in
 * transactions of 500. This thread shares the core with the event loop, which the scheduler gives its turn
 * during a long transaction as during a short one. A failed batch is retried whole; rows already in are
 * skipped (ON CONFLICT DO NOTHING).
 */
// One call at a time, and close only after the last one.
let work: Promise<void> = Promise.resolve();

port.on('message', (msg: { id: number; method: string; args: unknown[] } | { close: true }) => {
  if ('close' in msg) {
    work = work.then(() => store.close()).then(() => port.close());
    return;
  }
  const { id, method, args } = msg;
  // A throw inside then() is the rejection the second callback answers with.
  work = work
    .then(() => {
      if (!CALLS.has(method)) throw new Error(`not a log store call: ${method}`);
      const fn = (store as unknown as Record<string, (...a: unknown[]) => unknown>)[method]!;
      return fn.apply(store, args);
    })
    .then(
      (result) => port.postMessage({ id, result } satisfies Reply),
      (err: unknown) =>
        port.postMessage({
          id,
          error: {
            name: err instanceof Error ? err.name : 'Error',
            message: err instanceof Error ? err.message : String(err),
            code: (err as { code?: unknown } | null)?.code,
          },
        } satisfies Reply),
    );
});

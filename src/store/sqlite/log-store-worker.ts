/**
 * Worker thread that owns one SQLite connection to the request log (store-thread.ts): the log writer's, or
 * the one the server queries through (log-thread.ts). Messages name a method of SqliteLogStore.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { SqliteLogStore } from './log-store.js';
import type { Reply, WorkerStoreOptions } from './store-thread.js';

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
  'prune',
  'count',
  'spendSince',
  'addSpend',
  'upsertBatch',
  'batchByOutputFile',
  'claimBatchResults',
  'listBatches',
]);

/**
 * A log writer's batch is one transaction: the queue hands over what it holds, up to
 * KEYRELAY_LOG_BATCH_SIZE rows (500). Each commit costs a WAL append, the last page of every index
 * rewritten and a new full-text segment that later merges cost again, whatever its size: measured per row
 * on a 300,000-row log (`bench/log-insert.ts` shape, one core), 17.0 µs in transactions of 100, 15.2 µs in
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

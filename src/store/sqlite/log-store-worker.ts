/**
 * Worker thread that owns one SQLite connection to the request log (../store-thread.ts): the log writer's, or
 * one of the two the server queries and prunes through (log-thread.ts). Messages name a method of
 * SqliteWriterStore (the SqliteLogStore, which also takes the writer's batches in parts); `nice` is how far
 * below the event loop the thread runs (../thread-worker.ts).
 */
import { workerData } from 'node:worker_threads';
import { lowerThreadPriority, serveStoreCalls } from '../thread-worker.js';
import type { SqliteWorkerData } from './log-store.js';

const { path, options, nice } = workerData as SqliteWorkerData;
lowerThreadPriority(nice);

// Imported once the priority is down (lowerThreadPriority says why).
const { SqliteWriterStore } = await import('./log-writer-store.js');
const store = new SqliteWriterStore(path, options);

/** What a caller may ask for: the store's queries and writes. Opening, migrating and closing are not calls. */
const CALLS = new Set<string>([
  'insertBatch',
  'insertEncoded',
  'stageEncoded',
  'insertStaged',
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
 * LOG_QUEUE_OPTIONS.batchSize rows (500), in parts (stageEncoded) and then the call that writes them all
 * (insertStaged). Each commit costs a WAL append, the last page of every index rewritten and a new full-text
 * segment that later merges cost again, whatever its size: measured per row on a fresh log (the bench's rows,
 * one core), 74 µs in transactions of 10, 46 µs of 35, 35 µs of 100 and 29 µs of 300. This thread shares the
 * core with the event loop, which the scheduler gives its turn during a long transaction as during a short
 * one. A failed batch is retried whole; rows already in are skipped (ON CONFLICT DO NOTHING).
 */
serveStoreCalls(store, CALLS, true);

/**
 * Worker thread that answers the console's reads of the PostgreSQL request log (log-thread.ts) with a
 * store and pool of its own, at the lowest priority there is.
 */
import { workerData } from 'node:worker_threads';
import { lowerThreadPriority, serveStoreCalls } from '../thread-worker.js';
import { PG_THREAD_READS } from './log-thread-reads.js';
import { PgLogStore, type PgLogStoreOptions } from './log-store.js';

/**
 * Lower than SQLite's store threads (../thread-worker.ts): this thread only reads, holding no lock anything
 * waits on, and nothing waits on it but a person at the console. Parsing and merging a month's view is
 * 10-20 ms of its CPU, which at nice 5 still delayed proxied requests on a shared core; at 19 the kernel runs
 * it when the event loop has nothing to do.
 */
const READER_NICE = 19;

lowerThreadPriority(READER_NICE);

const { url, options } = workerData as { url: string; options: PgLogStoreOptions };
serveStoreCalls(new PgLogStore(url, options), new Set<string>(PG_THREAD_READS), false);

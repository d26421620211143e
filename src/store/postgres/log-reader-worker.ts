/**
 * Worker thread that answers the console's reads of the PostgreSQL request log (log-thread.ts) with a
 * store and pool of its own, at the lowest priority there is.
 */
import { workerData } from 'node:worker_threads';
import { READING_THREAD_NICE } from '../store-thread.js';
import { lowerThreadPriority, serveStoreCalls } from '../thread-worker.js';
import { PG_THREAD_READS } from './log-thread-reads.js';
import type { PgLogStoreOptions } from './log-store.js';

lowerThreadPriority(READING_THREAD_NICE);

// Loaded once the priority is down (a static import runs before this module's first line): pg and the
// store's modules would otherwise load at the event loop's priority, on its core.
const { PgLogStore } = await import('./log-store.js');
const { url, options } = workerData as { url: string; options: PgLogStoreOptions };
serveStoreCalls(new PgLogStore(url, options), new Set<string>(PG_THREAD_READS), false);

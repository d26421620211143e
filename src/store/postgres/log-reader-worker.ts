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

// Imported once the priority is down (lowerThreadPriority says why).
const { PgLogStore } = await import('./log-store.js');
const { url, options } = workerData as { url: string; options: PgLogStoreOptions };
serveStoreCalls(new PgLogStore(url, options), new Set<string>(PG_THREAD_READS), false);

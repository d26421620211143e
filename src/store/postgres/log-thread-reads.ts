import type { LogStore } from '../types.js';

/** The reads the PostgreSQL log answers on its reading thread (log-thread.ts); the rest stay on the loop. */
export const PG_THREAD_READS = [
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
] as const satisfies readonly (keyof LogStore)[];

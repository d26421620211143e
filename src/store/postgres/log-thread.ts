/**
 * The PostgreSQL request log as the server uses it. The console's reads run on a worker thread with a pool
 * of its own (log-reader-worker.ts): the database does the summing, but the driver parsing a page of a
 * month's sums and the merge of their latency histograms are 10-20 ms of CPU a view, which on the event loop
 * views asked back to back would put in the proxy's p99. Writes, the prune, budgets' spend and the batch ledger are
 * quick statements whose results are small: they stay on the event loop's pool, as migrating does.
 */
import { LOG_READER_IDLE_MS, StoreThread } from '../store-thread.js';
import type { LogStore } from '../types.js';
import { PgLogStore, type PgLogStoreOptions } from './log-store.js';
import { PG_THREAD_READS } from './log-thread-reads.js';

type ThreadRead = (typeof PG_THREAD_READS)[number];

export interface PgLogThreadOptions extends PgLogStoreOptions {
  /** The reading thread exits after this long without a call (LOG_READER_IDLE_MS unless a test says otherwise). */
  idleMs?: number;
}

export class PgLogThread implements LogStore {
  private readonly local: PgLogStore;
  private readonly reader: StoreThread;

  constructor(url: string, opts: PgLogThreadOptions = {}) {
    const { idleMs, ...store } = opts;
    const { onSearchIndex: _notify, ...options } = store;
    this.local = new PgLogStore(url, store);
    this.reader = new StoreThread({
      name: 'the PostgreSQL log reader',
      module: new URL('./log-reader-worker', import.meta.url),
      workerData: { url, options },
      idleMs: idleMs ?? LOG_READER_IDLE_MS,
    });
    this.migrate = () => this.local.migrate();
    this.insertBatch = (rows) => this.local.insertBatch(rows);
    this.prune = (before, bodies) => this.local.prune(before, bodies);
    this.count = () => this.local.count();
    this.spendSince = (keyId, since, endUser) => this.local.spendSince(keyId, since, endUser);
    this.addSpend = (entries) => this.local.addSpend(entries);
    this.fillUsageRollup = () => this.local.fillUsageRollup();
    this.upsertBatch = (b) => this.local.upsertBatch(b);
    this.batchByOutputFile = (accountId, provider, fileId) =>
      this.local.batchByOutputFile(accountId, provider, fileId);
    this.claimBatchResults = (c) => this.local.claimBatchResults(c);
    this.listBatches = (accountId, limit) => this.local.listBatches(accountId, limit);
  }

  async close(): Promise<void> {
    await Promise.all([this.reader.close(), this.local.close()]);
  }

  private read<M extends ThreadRead>(method: M) {
    return (...args: Parameters<LogStore[M]>): ReturnType<LogStore[M]> =>
      this.reader.call(method, args) as ReturnType<LogStore[M]>;
  }

  readonly listRequests = this.read('listRequests');
  readonly getRequest = this.read('getRequest');
  readonly listRecent = this.read('listRecent');
  readonly usageSeries = this.read('usageSeries');
  readonly usageBreakdown = this.read('usageBreakdown');
  readonly usageTop = this.read('usageTop');
  readonly usageSeriesSplit = this.read('usageSeriesSplit');
  readonly listSessions = this.read('listSessions');
  readonly sessionCalls = this.read('sessionCalls');
  readonly pricingGaps = this.read('pricingGaps');
  readonly loggedCosts = this.read('loggedCosts');

  readonly migrate: LogStore['migrate'];
  readonly insertBatch: LogStore['insertBatch'];
  readonly prune: LogStore['prune'];
  readonly count: LogStore['count'];
  readonly spendSince: LogStore['spendSince'];
  readonly addSpend: LogStore['addSpend'];
  readonly fillUsageRollup: LogStore['fillUsageRollup'];
  readonly upsertBatch: LogStore['upsertBatch'];
  readonly batchByOutputFile: LogStore['batchByOutputFile'];
  readonly claimBatchResults: LogStore['claimBatchResults'];
  readonly listBatches: LogStore['listBatches'];
}

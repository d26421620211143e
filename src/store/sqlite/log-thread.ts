/**
 * The SQLite request log as the server queries it: every call on a worker thread (../store-thread.ts), so a
 * long read never holds the event loop. Both drivers are synchronous; on the event loop, a console chart over
 * a month of 1,000,000 rows (2.3 s) or an hourly prune stopped every proxied request until it returned.
 * Reads run on one thread at the lowest priority, beside the log writer's connection (WAL: a reader blocks no
 * writer); the prune, the batch ledger and the rollup's fill write on another, at the writer's priority, as
 * they hold SQLite's one write lock while they run (the ledger's lookup by output file too, so that it sees
 * every write handed over before it). A budget's spend is read on the writer's worker instead
 * (factory.ts, LogWriter.spendSince). Migrating stays on the caller's thread, at start.
 */
import type {
  BodyCutoff,
  BreakdownBy,
  BreakdownRank,
  InsertResult,
  LogStore,
  Page,
  PricingGapRow,
  LoggedCostRow,
  RequestFilter,
  RequestScope,
  RequestSort,
  RequestSummary,
  SessionSummary,
  SpendEntry,
  SplitBy,
  UsageBreakdownRow,
  UsagePoint,
  UsageSplitPoint,
} from '../types.js';
import type { RequestLogRow } from '../../types.js';
import type { BatchStore } from '../batch-types.js';
import { SqliteLogStore, type SqliteLogStoreOptions, type SqliteWorkerData } from './log-store.js';
import {
  LOG_READER_IDLE_MS,
  READING_THREAD_NICE,
  StoreThread,
  WRITING_THREAD_NICE,
} from '../store-thread.js';

export interface SqliteLogThreadOptions extends SqliteLogStoreOptions {
  /** Each worker exits after this long without a call (LOG_READER_IDLE_MS unless a test says otherwise). */
  idleMs?: number;
}

export class SqliteLogThread implements LogStore {
  private readonly reads: StoreThread;
  private readonly writes: StoreThread;

  constructor(
    private readonly path: string,
    private readonly opts: SqliteLogThreadOptions = {},
  ) {
    const { onSearchIndex: _notify, idleMs, ...store } = opts;
    const thread = (nice: number) =>
      new StoreThread({
        name: 'the SQLite log store',
        module: new URL('./log-store-worker', import.meta.url),
        workerData: { path, options: store, nice } satisfies SqliteWorkerData,
        idleMs: idleMs ?? LOG_READER_IDLE_MS,
      });
    this.reads = thread(READING_THREAD_NICE);
    this.writes = thread(WRITING_THREAD_NICE);
  }

  async migrate(): Promise<void> {
    const { idleMs: _idle, ...store } = this.opts;
    const migrator = new SqliteLogStore(this.path, store);
    try {
      await migrator.migrate();
    } finally {
      await migrator.close();
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.reads.close(), this.writes.close()]);
  }

  private call<T>(method: keyof LogStore, ...args: unknown[]): Promise<T> {
    return this.reads.call<T>(method, args);
  }

  private write<T>(method: keyof LogStore, ...args: unknown[]): Promise<T> {
    return this.writes.call<T>(method, args);
  }

  insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult> {
    return this.write('insertBatch', rows);
  }
  listRequests(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null; sort?: RequestSort },
  ): Promise<Page<RequestSummary>> {
    return this.call('listRequests', f, opts);
  }
  getRequest(scope: string | RequestScope, id: string): Promise<RequestLogRow | null> {
    return this.call('getRequest', scope, id);
  }
  listRecent(opts: { limit: number; account_id?: string }): Promise<RequestSummary[]> {
    return this.call('listRecent', opts);
  }
  usageSeries(f: RequestFilter, bucket: 'minute' | 'hour' | 'day'): Promise<UsagePoint[]> {
    return this.call('usageSeries', f, bucket);
  }
  usageBreakdown(f: RequestFilter, by: BreakdownBy): Promise<UsageBreakdownRow[]> {
    return this.call('usageBreakdown', f, by);
  }
  usageSeriesSplit(
    f: RequestFilter,
    bucket: 'minute' | 'hour' | 'day',
    by: SplitBy,
    groups: readonly string[],
  ): Promise<UsageSplitPoint[]> {
    return this.call('usageSeriesSplit', f, bucket, by, groups);
  }
  listSessions(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<SessionSummary>> {
    return this.call('listSessions', f, opts);
  }
  sessionCalls(
    scope: RequestScope,
    session: string,
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<RequestSummary>> {
    return this.call('sessionCalls', scope, session, opts);
  }
  prune(before: string, bodies?: readonly BodyCutoff[]): Promise<{ deleted: number }> {
    return this.write('prune', before, bodies);
  }
  count(): Promise<number> {
    return this.call('count');
  }
  pricingGaps(from: string, to: string): Promise<PricingGapRow[]> {
    return this.call('pricingGaps', from, to);
  }
  loggedCosts(from: string, to: string, providers: readonly string[]): Promise<LoggedCostRow[]> {
    return this.call('loggedCosts', from, to, providers);
  }

  spendSince(keyId: string, since: string, endUser?: string): Promise<number> {
    return this.call('spendSince', keyId, since, endUser);
  }
  addSpend(entries: readonly SpendEntry[]): Promise<void> {
    return this.write('addSpend', entries);
  }
  usageTop(
    f: RequestFilter,
    by: BreakdownBy,
    rank: BreakdownRank,
    limit: number,
  ): Promise<{ rows: UsageBreakdownRow[]; total_groups: number }> {
    return this.call('usageTop', f, by, rank, limit);
  }
  fillUsageRollup(): Promise<boolean> {
    return this.write('fillUsageRollup');
  }
  upsertBatch: BatchStore['upsertBatch'] = (b) => this.write('upsertBatch', b);
  // On the writing thread, behind the writes handed over before it: a poll's record of the batch is written
  // after the poll was answered, and the download that follows must find it whatever the reading thread's pace.
  batchByOutputFile: BatchStore['batchByOutputFile'] = (accountId, provider, fileId) =>
    this.write('batchByOutputFile', accountId, provider, fileId);
  claimBatchResults: BatchStore['claimBatchResults'] = (c) => this.write('claimBatchResults', c);
  listBatches: BatchStore['listBatches'] = (accountId, limit) => this.call('listBatches', accountId, limit);
}

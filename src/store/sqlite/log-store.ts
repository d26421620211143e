/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/**
 * LogStore on SQLite, in its own file apart from the config store: the request log is the write-heavy one.
 */
import type { RequestLogRow } from '../../types.js';
import { domainError } from '../../errors.js';
import {
  LOGGED_COST_SQL,
  toLoggedCost,
  BOOL_COLUMNS,
  DEFAULT_SEARCH_SCAN_ROWS,
  DETAIL_COLUMNS,
  JSON_COLUMNS,
  NULLABLE_JSON_COLUMNS,
  LOG_COLUMNS,
  SUMMARY_COLUMNS,
  buildWhere,
  NEWEST_FIRST,
  pageCursor,
  pageSql,
  decodeCursor,
  encodeEach,
  encodeCursor,
  idsBefore,
  idsFrom,
  scanSearchSql,
  searchGroups,
  NANOS_PER_USD,
  spendBefore,
  scopeWhere,
  type WhereDialect,
} from '../log-query.js';
import { PROVIDER_NAME } from '../../providers/ids.js';
import { toIso } from '../time.js';
import {
  LOGGED_COST_GROUPS,
  PRICING_GAP_GROUPS,
  type BodyCutoff,
  type InsertResult,
  type LogStore,
  type Page,
  type PricingGapRow,
  type LoggedCostRow,
  type RequestFilter,
  type RequestScope,
  type SpendEntry,
  type RequestSort,
  type RequestSummary,
} from '../types.js';
import { createStatementCache, openSqlite, runSqliteMigrations, type Db, type StatementCache } from './db.js';
import type { OpenOptions } from './driver.js';
import { LOG_MIGRATIONS } from './log-schema.js';
import {
  DEFAULT_LOG_SEARCH,
  HAS_SEARCH_INDEX_SQL,
  INDEX_NEW_ROWS_SQL,
  applyLogSearch,
  hasSearchIndex,
  type LogSearchSettings,
} from './log-search.js';
import { sqliteBatchStore } from './batches.js';
import { sqliteSessionReads } from './sessions.js';
import {
  addInsertedRows,
  fillOneDay,
  pruneRollup,
  registerRollupFunctions,
  sqliteUsageReads,
} from './usage-rollup.js';
import { ROLLUP_MIN_ROWS } from '../usage-rollup.js';
import type { BatchStore } from '../batch-types.js';

type Value = string | number | null;
type DbRow = Record<string, unknown>;

const PRUNE_CHUNK = 5000;
const BUCKET_SQL = {
  minute: "substr(created_at, 1, 16) || ':00.000Z'",
  hour: "substr(created_at, 1, 13) || ':00:00.000Z'",
  day: "substr(created_at, 1, 10) || 'T00:00:00.000Z'",
} as const;

/**
 * The values the table's CHECKs (and, for providers, the name rule) allow in its text columns, checked while encoding, so that the log writer's
 * connection can skip the CHECKs (`trustEncoded`). The other CHECKs hold by construction: booleans are
 * bound as 0 or 1, JSON columns are what JSON.stringify returned.
 */
const ALLOWED: Partial<Record<string, { has(v: unknown): boolean }>> = {
  // Named upstreams are configuration: a row's provider is any well-formed provider name.
  provider: { has: (v) => typeof v === 'string' && PROVIDER_NAME.test(v) },
  outcome: new Set(['ok', 'upstream_error', 'client_aborted', 'timeout', 'refused']),
  usage_source: new Set(['provider', 'estimated', 'partial', 'none']),
};

/** How each LOG_COLUMNS entry is bound, worked out once: this runs for every logged request. */
const ENCODERS: ((r: RequestLogRow) => Value)[] = LOG_COLUMNS.map((c) => {
  if (c === 'created_at') return (r) => toIso(r.created_at);
  const allowed = ALLOWED[c];
  if (allowed)
    return (r) => {
      if (!allowed.has(r[c])) throw new RangeError(`${c} cannot be ${JSON.stringify(r[c])}`);
      return r[c] as string;
    };
  if ((BOOL_COLUMNS as readonly string[]).includes(c)) return (r) => (r[c] ? 1 : 0);
  if ((JSON_COLUMNS as readonly string[]).includes(c)) return (r) => JSON.stringify(r[c]);
  if ((NULLABLE_JSON_COLUMNS as readonly string[]).includes(c))
    return (r) => (r[c] == null ? null : JSON.stringify(r[c]));
  return (r) => {
    const v: unknown = r[c];
    return v === undefined ? null : (v as Value);
  };
});

/** A row as bound to the INSERT: its values in LOG_COLUMNS order. */
export type EncodedRow = Value[];

/**
 * Values in LOG_COLUMNS order: node:sqlite binds `?` ~5× faster than named parameters (~15 µs a row). Built
 * by push: an array allocated at its length (`new Array(n)`, or map once optimized, which inlines to the
 * same) is holey, and V8's structured clone (postMessage to the writer) writes a holey array in its sparse
 * form, index by index: 2.5× the time to serialize on the event loop and 2.2× to read back in the writer,
 * where it was 14 % of the thread's CPU under load.
 */
function encodeRow(r: RequestLogRow): EncodedRow {
  const out: EncodedRow = [];
  for (const encode of ENCODERS) out.push(encode(r));
  return out;
}

/** Encodes rows for insertEncoded; a row that cannot be encoded is counted as rejected, the rest kept. */
export function encodeRows(rows: readonly RequestLogRow[]): { encoded: EncodedRow[]; rejected: number } {
  return encodeEach(rows, encodeRow, isRowError);
}

function decodeRow<T>(row: DbRow): T {
  for (const c of BOOL_COLUMNS) if (c in row) row[c] = row[c] === 1;
  for (const c of JSON_COLUMNS) if (c in row) row[c] = JSON.parse(row[c] as string);
  for (const c of NULLABLE_JSON_COLUMNS)
    if (c in row && row[c] !== null) row[c] = JSON.parse(row[c] as string);
  return row as T;
}

/** A failure that belongs to one row (constraint, type), as opposed to the database being unavailable. */
function isRowError(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError) return true;
  const code = err instanceof Error && 'code' in err ? String(err.code) : '';
  return code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_MISMATCH' || code === 'SQLITE_TOOBIG';
}

export interface SqliteLogStoreOptions extends OpenOptions {
  /** KEYRELAY_LOG_SEARCH: keep the full-text index (default true). Applied by migrate(). */
  search?: boolean;
  /** Characters of each body the index reads (DEFAULT_LOG_SEARCH.bodyChars). Applied by migrate(). */
  searchBodyChars?: number;
  /** Newest rows one page of search reads when there is no index (DEFAULT_SEARCH_SCAN_ROWS). */
  searchScanRows?: number;
  /** Told when migrate() drops or rebuilds the index (a rebuild delays the start: the log says why). */
  onSearchIndex?: (msg: string) => void;
  /** Ranges with fewer rows are summed from the rows rather than the usage rollup (ROLLUP_MIN_ROWS). */
  rollupMinRows?: number;
  /**
   * This connection only inserts rows encodeRows checked (the log writer's): SQLite skips the table's
   * CHECKs, which encoding already guarantees. They cost ~2.3 of ~13 µs a row with small bodies and ~3.3
   * with a 1.5 KB request, mostly json_valid re-parsing both header objects. Other connections keep them,
   * and with them the batches table's.
   */
  trustEncoded?: boolean;
}

/** What a worker's store is opened with (store-thread.ts): the options that cross a thread (no callbacks). */
export type WorkerStoreOptions = Omit<SqliteLogStoreOptions, 'onSearchIndex'>;

/** What a worker of log-store-worker.ts is started with. */
export interface SqliteWorkerData {
  path: string;
  options: WorkerStoreOptions;
  /** How many nice levels below the starting thread it runs (store-thread.ts's WRITING_/READING_THREAD_NICE). */
  nice: number;
}

export class SqliteLogStore implements LogStore {
  private readonly db: Db;
  private readonly stmt: StatementCache;
  private readonly search: LogSearchSettings;
  private readonly scanRows: number;
  private readonly onSearchIndex: ((msg: string) => void) | undefined;

  constructor(path: string, opts: SqliteLogStoreOptions = {}) {
    this.db = openSqlite(path, opts);
    if (opts.trustEncoded) this.db.exec('PRAGMA ignore_check_constraints = ON');
    this.onSearchIndex = opts.onSearchIndex;
    this.search = {
      enabled: opts.search ?? DEFAULT_LOG_SEARCH.enabled,
      bodyChars: opts.searchBodyChars ?? DEFAULT_LOG_SEARCH.bodyChars,
    };
    this.scanRows = Math.max(1, Math.floor(opts.searchScanRows ?? DEFAULT_SEARCH_SCAN_ROWS));
    this.stmt = createStatementCache(this.db);
    registerRollupFunctions(this.db);
    const batches = sqliteBatchStore(this.stmt);
    this.upsertBatch = batches.upsertBatch;
    this.batchByOutputFile = batches.batchByOutputFile;
    this.claimBatchResults = batches.claimBatchResults;
    this.listBatches = batches.listBatches;
    const sessions = sqliteSessionReads(this.stmt, (params) => this.dialect(params), decodeRow, BUCKET_SQL);
    this.listSessions = sessions.listSessions;
    this.sessionCalls = sessions.sessionCalls;
    const usage = sqliteUsageReads(
      this.stmt,
      (params) => this.dialect(params),
      sessions.usageSeriesSplit,
      BUCKET_SQL,
      opts.rollupMinRows ?? ROLLUP_MIN_ROWS,
    );
    this.usageSeries = usage.usageSeries;
    this.usageBreakdown = usage.usageBreakdown;
    this.usageTop = usage.usageTop;
    this.usageSeriesSplit = usage.usageSeriesSplit;
  }

  readonly usageSeries: LogStore['usageSeries'];
  readonly usageBreakdown: LogStore['usageBreakdown'];
  readonly usageTop: LogStore['usageTop'];
  readonly usageSeriesSplit: LogStore['usageSeriesSplit'];
  readonly listSessions: LogStore['listSessions'];
  readonly sessionCalls: LogStore['sessionCalls'];
  readonly upsertBatch: BatchStore['upsertBatch'];
  readonly batchByOutputFile: BatchStore['batchByOutputFile'];
  readonly claimBatchResults: BatchStore['claimBatchResults'];
  readonly listBatches: BatchStore['listBatches'];

  /** The numbered migrations, then the full-text index as the settings ask (log-search.ts). */
  async migrate(): Promise<void> {
    runSqliteMigrations(this.db, LOG_MIGRATIONS);
    applyLogSearch(this.db, this.search, this.onSearchIndex);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  async insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult> {
    const { encoded, rejected } = encodeRows(rows);
    return Promise.resolve(this.insertEncoded(encoded, rejected));
  }

  /**
   * Writes encoded rows (encodeRows) in one transaction; `rejected` rows were refused before. The log writer
   * encodes on the event loop and sends these arrays to its worker: a structured clone of 45 values costs
   * less than one of an object with 45 named properties, and the worker's share of the core is smaller.
   */
  insertEncoded(encoded: readonly EncodedRow[], refusedBefore: number): InsertResult {
    let rejected = refusedBefore;
    if (encoded.length === 0) return { inserted: 0, rejected };
    const insert = this.stmt<Value[]>(
      `INSERT INTO requests (${LOG_COLUMNS.join(', ')}) VALUES (${LOG_COLUMNS.map(() => '?').join(', ')})
       ON CONFLICT(id) DO NOTHING`,
    );
    // The rows this batch wrote (a repeated id is left as it was): what the usage rollup adds.
    const written: EncodedRow[] = [];
    const write = (p: EncodedRow) => {
      const n = insert.run(...p).changes;
      if (n > 0) written.push(p);
      return n;
    };
    try {
      const inserted = this.db.transaction(
        () => this.withNewRows(written, () => encoded.reduce((n, p) => n + write(p), 0)),
        { immediate: true },
      );
      return { inserted, rejected };
    } catch (err) {
      if (!isRowError(err)) throw err;
      written.length = 0;
    }
    // One poison row must not sink the batch: redo it row by row, each under a savepoint, skipping failures.
    let inserted = 0;
    this.db.transaction(
      () =>
        this.withNewRows(written, () => {
          for (const p of encoded) {
            try {
              inserted += this.db.transaction(() => write(p));
            } catch (err) {
              if (!isRowError(err)) throw err;
              rejected++;
            }
          }
        }),
      { immediate: true },
    );
    return { inserted, rejected };
  }

  /**
   * Runs the inserts, then adds the rows they wrote to the usage rollup (`written`, which they fill) and, if
   * the file has one, to the full-text index in one statement (log-search.ts: ~3 µs a row, where an insert
   * trigger cost ~20). Inside the caller's transaction, so a row, its rollup sums and its index entry commit
   * together. That transaction is IMMEDIATE: it holds the write lock from its start, so every rowid above the
   * one read first is a row written here (and a concurrent prune makes it wait, not fail on a stale snapshot).
   */
  private withNewRows<T>(written: readonly EncodedRow[], insertRows: () => T): T {
    const indexed = this.stmt<[], { n: number }>(HAS_SEARCH_INDEX_SQL).get()!.n > 0;
    const before = indexed
      ? this.stmt<[], { m: number }>('SELECT COALESCE(MAX(rowid), 0) AS m FROM requests').get()!.m
      : 0;
    const result = insertRows();
    addInsertedRows(this.stmt, written);
    if (indexed) this.stmt<[number]>(INDEX_NEW_ROWS_SQL).run(before);
    return result;
  }

  async listRequests(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null; sort?: RequestSort },
  ): Promise<Page<RequestSummary>> {
    const sort = opts.sort ?? NEWEST_FIRST;
    const words = f.search === undefined ? [] : searchGroups(f.search);
    // Asked each time rather than remembered: cheap (the schema is in memory), and right whichever
    // setting the process that last started on this file had.
    if (words.length > 0 && !hasSearchIndex(this.db)) {
      if (sort.by !== 'time' || sort.dir !== 'desc') throw domainError('invalid_sort');
      return this.scanSearch(f, words, opts);
    }
    const params: (string | number)[] = [];
    const d = this.dialect(params);
    const limit = Math.max(1, Math.floor(opts.limit));
    const sql = pageSql(SUMMARY_COLUMNS.join(', '), f, d, sort, opts.cursor, limit + 1, '=');
    const rows = this.stmt<unknown[], DbRow>(sql).all(...params);
    const items = rows.slice(0, limit).map((r) => decodeRow<RequestSummary>(r));
    const more = rows.length > limit;
    return { items, next_cursor: more && items.length ? pageCursor(sort, items[items.length - 1]!) : null };
  }

  /**
   * Search with no full-text index: reads the newest `scanRows` rows that pass the other filters (from the
   * cursor on), newest first, and stops at a page of matches. A window read to its end without filling the
   * page still returns a cursor (its last row), so the console's "more" continues the scan from there.
   */
  private scanSearch(
    f: RequestFilter,
    words: string[][],
    opts: { limit: number; cursor?: string | null },
  ): Page<RequestSummary> {
    // Placeholders are positional: the select list's come first.
    const params: (string | number)[] = [];
    const d = this.dialect(params);
    const hit = scanSearchSql(words, (v) => d.bind(v), 'LIKE');
    let where = buildWhere({ ...f, search: undefined }, d);
    if (opts.cursor) where += ` AND id < ${d.bind(decodeCursor(opts.cursor))}`;
    const limit = Math.max(1, Math.floor(opts.limit));
    const rows = this.stmt<unknown[], DbRow & { hit: number }>(
      `SELECT ${SUMMARY_COLUMNS.join(', ')}, ${hit} AS hit FROM requests WHERE ${where}
       ORDER BY id DESC LIMIT ${d.bind(this.scanRows)}`,
    ).iterate(...params);
    const found: DbRow[] = [];
    let scanned = 0;
    let lastId: string | null = null;
    for (const { hit: matches, ...row } of rows) {
      scanned++;
      lastId = row.id as string;
      if (matches && found.push(row) > limit) break;
    }
    const items = found.slice(0, limit).map((r) => decodeRow<RequestSummary>(r));
    let next: string | null = null;
    if (found.length > limit) next = items[items.length - 1]!.id;
    else if (scanned === this.scanRows) next = lastId;
    return { items, next_cursor: next === null ? null : encodeCursor(next) };
  }

  async getRequest(scope: string | RequestScope, id: string): Promise<RequestLogRow | null> {
    const params: string[] = [id];
    const where = scopeWhere(scope, { bind: (v) => (params.push(String(v)), '?') });
    const row = this.stmt<string[], DbRow>(
      `SELECT ${DETAIL_COLUMNS.join(', ')} FROM requests WHERE id = ? AND ${where}`,
    ).get(...params);
    return row ? decodeRow<RequestLogRow>(row) : null;
  }

  async listRecent(opts: { limit: number; account_id?: string }): Promise<RequestSummary[]> {
    const limit = Math.max(1, Math.floor(opts.limit));
    const cols = SUMMARY_COLUMNS.join(', ');
    const rows =
      opts.account_id === undefined
        ? this.stmt<[number], DbRow>(`SELECT ${cols} FROM requests ORDER BY id DESC LIMIT ?`).all(limit)
        : this.stmt<[string, number], DbRow>(
            `SELECT ${cols} FROM requests WHERE account_id = ? ORDER BY id DESC LIMIT ?`,
          ).all(opts.account_id, limit);
    return rows.map((r) => decodeRow<RequestSummary>(r));
  }

  /** Adds the newest day the usage rollup lacks (LogStore.fillUsageRollup). */
  async fillUsageRollup(): Promise<boolean> {
    return fillOneDay(this.db, this.stmt);
  }

  async pricingGaps(from: string, to: string): Promise<PricingGapRow[]> {
    // Along the primary key: ids start with their time (log-query.ts, ID_TIME_SLACK_MS).
    return this.stmt<[string, string, string, string, number], PricingGapRow>(
      `SELECT provider, model, price_source, COUNT(*) AS requests FROM requests
       WHERE id >= ? AND id < ? AND created_at >= ? AND created_at < ?
         AND (price_source LIKE 'unpriced:%' OR price_source LIKE 'partial:%')
       GROUP BY provider, model, price_source ORDER BY requests DESC, provider, model LIMIT ?`,
    ).all(idsFrom(from), idsBefore(to), toIso(from), toIso(to), PRICING_GAP_GROUPS);
  }

  async loggedCosts(from: string, to: string, providers: readonly string[]): Promise<LoggedCostRow[]> {
    if (providers.length === 0) return [];
    const rows = this.stmt<(string | number)[], Record<keyof LoggedCostRow, string | number | null>>(
      `SELECT ${LOGGED_COST_SQL} FROM requests
       WHERE id >= ? AND id < ? AND created_at >= ? AND created_at < ?
         AND provider IN (${providers.map(() => '?').join(', ')})
       GROUP BY provider, model, credential_fingerprint
       ORDER BY cost_usd DESC, provider, model, credential_fingerprint LIMIT ?`,
    ).all(idsFrom(from), idsBefore(to), toIso(from), toIso(to), ...providers, LOGGED_COST_GROUPS);
    return rows.map(toLoggedCost);
  }

  async prune(before: string, bodies: readonly BodyCutoff[] = []): Promise<{ deleted: number }> {
    // The rollup first: a read meanwhile takes the days losing rows from the rows, never from stale sums.
    pruneRollup(this.db, this.stmt, before);
    // Small chunks, each its own transaction, so the log writer is never blocked for long. Oldest first,
    // along the primary key: ids start with their time (log-query.ts, ID_TIME_SLACK_MS).
    const del = this.stmt<[string, string, number]>(
      `DELETE FROM requests WHERE rowid IN (
         SELECT rowid FROM requests WHERE id < ? AND created_at < ? ORDER BY id LIMIT ?)`,
    );
    let deleted = 0;
    let n: number;
    do {
      n = del.run(idsBefore(before), toIso(before), PRUNE_CHUNK).changes;
      deleted += n;
    } while (n === PRUNE_CHUNK);
    // Through the index of rows that still hold a body: a row stripped once is never read again.
    const strip = this.stmt<[string, string, number]>(
      `UPDATE requests SET request_body = NULL, response_body = NULL, response_search_text = NULL WHERE rowid IN (
         SELECT rowid FROM requests INDEXED BY requests_with_body
         WHERE created_at < ? AND account_id = ? AND (request_body IS NOT NULL OR response_body IS NOT NULL)
         LIMIT ?)`,
    );
    for (const cut of bodies)
      while (strip.run(toIso(cut.before), cut.account_id, PRUNE_CHUNK).changes === PRUNE_CHUNK);
    this.stmt<[string]>('DELETE FROM key_spend WHERE hour < ?').run(spendBefore(before));
    return { deleted };
  }

  async count(): Promise<number> {
    return this.stmt<[], { n: number }>('SELECT COUNT(*) AS n FROM requests').get()!.n;
  }

  async spendSince(keyId: string, since: string, endUser?: string): Promise<number> {
    if (endUser !== undefined) {
      // Through (key_id, end_user, id): that end user's rows of the period alone.
      return this.stmt<[string, string, string, string], { s: number }>(
        `SELECT COALESCE(SUM(cost_usd), 0) AS s FROM requests
         WHERE key_id = ? AND end_user = ? AND id >= ? AND created_at >= ?`,
      ).get(keyId, endUser, idsFrom(since), toIso(since))!.s;
    }
    // The period alone, through (key_id, id): ids start with their time (log-query.ts, ID_TIME_SLACK_MS).
    const logged = this.stmt<[string, string, string], { s: number }>(
      'SELECT COALESCE(SUM(cost_usd), 0) AS s FROM requests WHERE key_id = ? AND id >= ? AND created_at >= ?',
    ).get(keyId, idsFrom(since), toIso(since))!.s;
    const hourly = this.stmt<[string, string], { n: number }>(
      'SELECT COALESCE(SUM(cost_nanos), 0) AS n FROM key_spend WHERE key_id = ? AND hour >= ?',
    ).get(keyId, toIso(since))!.n;
    return logged + hourly / NANOS_PER_USD;
  }

  async addSpend(entries: readonly SpendEntry[]): Promise<void> {
    const add = this.stmt<[string, string, number]>(
      `INSERT INTO key_spend (key_id, hour, cost_nanos) VALUES (?, ?, ?)
       ON CONFLICT (key_id, hour) DO UPDATE SET cost_nanos = cost_nanos + excluded.cost_nanos`,
    );
    this.db.transaction(
      () => {
        for (const e of entries) add.run(e.key_id, toIso(e.hour), e.nanos);
      },
      { immediate: true },
    );
  }

  private dialect(params: (string | number)[]): WhereDialect {
    return {
      bind(value: string | number) {
        params.push(value);
        return '?';
      },
      propertyEquals: (name: string, value: string) =>
        `EXISTS (SELECT 1 FROM json_each(requests.properties) WHERE key = ${name} AND value = ${value})`,
      propertyPresent: (name: string) =>
        `EXISTS (SELECT 1 FROM json_each(requests.properties) WHERE key = ${name})`,
      // FTS5: each word a quoted string (so no word is read as query syntax), a group's words ANDed.
      search: (groups: string[][]) => {
        params.push(groups.map((g) => `(${g.map((w) => `"${w}"`).join(' AND ')})`).join(' OR '));
        return 'rowid IN (SELECT rowid FROM requests_fts WHERE requests_fts MATCH ?)';
      },
    };
  }
}

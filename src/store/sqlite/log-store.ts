/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/**
 * LogStore on SQLite, in its own file apart from the config store: the request log is the write-heavy one.
 */
import type { RequestLogRow } from '../../types.js';
import {
  AGGREGATE_SQL,
  BOOL_COLUMNS,
  DEFAULT_SEARCH_SCAN_ROWS,
  DETAIL_COLUMNS,
  JSON_COLUMNS,
  LOG_COLUMNS,
  NO_MODEL_GROUP,
  SUMMARY_COLUMNS,
  buildWhere,
  decodeCursor,
  encodeEach,
  encodeCursor,
  idsBefore,
  idsFrom,
  percentileCont,
  scanSearchSql,
  searchWords,
  sortBreakdown,
  NANOS_PER_USD,
  spendBefore,
  toUsageNumbers,
  type AggregateRow,
} from '../log-query.js';
import { toIso } from '../time.js';
import type {
  InsertResult,
  LogStore,
  Page,
  RequestFilter,
  SpendEntry,
  RequestSummary,
  UsageBreakdownRow,
  UsagePoint,
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
import type { BatchStore } from '../batch-types.js';

type Value = string | number | null;
type DbRow = Record<string, unknown>;

const PRUNE_CHUNK = 5000;
const BUCKET_SQL = {
  minute: "substr(created_at, 1, 16) || ':00.000Z'",
  hour: "substr(created_at, 1, 13) || ':00:00.000Z'",
  day: "substr(created_at, 1, 10) || 'T00:00:00.000Z'",
} as const;
const GROUP_SQL = {
  model: `COALESCE(model, '${NO_MODEL_GROUP}')`,
  key_id: 'key_id',
  provider: 'provider',
} as const;

/**
 * The values the table's CHECKs allow in its text columns, checked while encoding, so that the log writer's
 * connection can skip the CHECKs (`trustEncoded`). The other CHECKs hold by construction: booleans are
 * bound as 0 or 1, JSON columns are what JSON.stringify returned.
 */
const ALLOWED: Partial<Record<string, ReadonlySet<unknown>>> = {
  provider: new Set(['openai', 'anthropic']),
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
  /** KEYRELAY_LOG_SEARCH_BODY_CHARS: characters of each body the index reads. Applied by migrate(). */
  searchBodyChars?: number;
  /** KEYRELAY_LOG_SEARCH_SCAN_ROWS: newest rows one page of search reads when there is no index. */
  searchScanRows?: number;
  /** Told when migrate() drops or rebuilds the index (a rebuild delays the start: the log says why). */
  onSearchIndex?: (msg: string) => void;
  /**
   * This connection only inserts rows encodeRows checked (the log writer's): SQLite skips the table's
   * CHECKs, which encoding already guarantees. They cost ~2.3 of ~13 µs a row with small bodies and ~3.3
   * with a 1.5 KB request, mostly json_valid re-parsing both header objects (docs/performance.md, "Eighth
   * pass"). Other connections keep them, and with them the batches table's.
   */
  trustEncoded?: boolean;
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
    const batches = sqliteBatchStore(this.stmt);
    this.upsertBatch = batches.upsertBatch;
    this.batchByOutputFile = batches.batchByOutputFile;
    this.claimBatchResults = batches.claimBatchResults;
    this.listBatches = batches.listBatches;
  }

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
    try {
      const inserted = this.db.transaction(
        () => this.indexing(() => encoded.reduce((n, p) => n + insert.run(...p).changes, 0)),
        { immediate: true },
      );
      return { inserted, rejected };
    } catch (err) {
      if (!isRowError(err)) throw err;
    }
    // One poison row must not sink the batch: redo it row by row, each under a savepoint, skipping failures.
    let inserted = 0;
    this.db.transaction(
      () =>
        this.indexing(() => {
          for (const p of encoded) {
            try {
              inserted += this.db.transaction(() => insert.run(...p).changes);
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
   * Runs the inserts, then adds the rows they wrote to the full-text index, if the file has one, in one
   * statement (log-search.ts: ~3 µs a row, where an insert trigger cost ~20). Inside the caller's
   * transaction, so a row and its index entry commit together. That transaction is IMMEDIATE: it holds the
   * write lock from its start, so every rowid above the one read first is a row written here (and a
   * concurrent prune makes it wait, not fail on a stale snapshot).
   */
  private indexing<T>(insertRows: () => T): T {
    if (this.stmt<[], { n: number }>(HAS_SEARCH_INDEX_SQL).get()!.n === 0) return insertRows();
    const before = this.stmt<[], { m: number }>('SELECT COALESCE(MAX(rowid), 0) AS m FROM requests').get()!.m;
    const result = insertRows();
    this.stmt<[number]>(INDEX_NEW_ROWS_SQL).run(before);
    return result;
  }

  async listRequests(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<RequestSummary>> {
    const words = f.search === undefined ? [] : searchWords(f.search);
    // Asked each time rather than remembered: cheap (the schema is in memory), and right whichever
    // setting the process that last started on this file had.
    if (words.length > 0 && !hasSearchIndex(this.db)) return this.scanSearch(f, words, opts);
    const params: (string | number)[] = [];
    let where = buildWhere(f, this.dialect(params));
    if (opts.cursor) {
      params.push(decodeCursor(opts.cursor));
      where += ' AND id < ?';
    }
    const limit = Math.max(1, Math.floor(opts.limit));
    params.push(limit + 1);
    const rows = this.stmt<unknown[], DbRow>(
      `SELECT ${SUMMARY_COLUMNS.join(', ')} FROM requests WHERE ${where} ORDER BY id DESC LIMIT ?`,
    ).all(...params);
    const items = rows.slice(0, limit).map((r) => decodeRow<RequestSummary>(r));
    const more = rows.length > limit;
    return { items, next_cursor: more && items.length ? encodeCursor(items[items.length - 1]!.id) : null };
  }

  /**
   * Search with no full-text index: reads the newest `scanRows` rows that pass the other filters (from the
   * cursor on), newest first, and stops at a page of matches. A window read to its end without filling the
   * page still returns a cursor (its last row), so the console's "more" continues the scan from there.
   */
  private scanSearch(
    f: RequestFilter,
    words: string[],
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

  async getRequest(accountId: string, id: string): Promise<RequestLogRow | null> {
    const row = this.stmt<[string, string], DbRow>(
      `SELECT ${DETAIL_COLUMNS.join(', ')} FROM requests WHERE id = ? AND account_id = ?`,
    ).get(id, accountId);
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

  async usageSeries(f: RequestFilter, bucket: 'minute' | 'hour' | 'day'): Promise<UsagePoint[]> {
    const groups = this.aggregate(f, BUCKET_SQL[bucket]);
    return groups
      .map(({ key, numbers }) => ({ bucket: key, ...numbers }))
      .sort((a, b) => (a.bucket < b.bucket ? -1 : 1));
  }

  async usageBreakdown(f: RequestFilter, by: 'model' | 'key_id' | 'provider'): Promise<UsageBreakdownRow[]> {
    return sortBreakdown(
      this.aggregate(f, GROUP_SQL[by]).map(({ key, numbers }) => ({ group: key, ...numbers })),
    );
  }

  /**
   * Sums in SQL; percentiles in JS over each group's latencies (SQLite has no percentile_cont), which the same
   * statement hands over as one text per group. 17 significant digits read back as the same double; a
   * REAL's own text does not everywhere (node:sqlite's SQLite 3.51 on Node 22 writes 1/3 with 15). Reading
   * the rows a second time for the latencies cost as much again: 2.3 → 1.3 s for a month by day over
   * 1,000,000 rows (docs/performance.md, "Twelfth pass").
   */
  private aggregate(f: RequestFilter, keySql: string) {
    const params: (string | number)[] = [];
    const where = buildWhere(f, this.dialect(params));
    const groups = this.stmt<unknown[], AggregateRow & { k: string; latencies: string }>(
      `SELECT ${keySql} AS k, ${AGGREGATE_SQL}, group_concat(printf('%!.17g', latency_ms)) AS latencies
       FROM requests WHERE ${where} GROUP BY k`,
    ).all(...params);
    return groups.map(({ latencies, ...s }) => {
      const sorted = Float64Array.from(latencies.split(','), Number).sort();
      return {
        key: s.k,
        numbers: toUsageNumbers(s, percentileCont(sorted, 0.5), percentileCont(sorted, 0.95)),
      };
    });
  }

  async prune(before: string, bodiesBefore?: string): Promise<{ deleted: number }> {
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
    if (bodiesBefore !== undefined) {
      const strip = this.stmt<[string, number]>(
        `UPDATE requests SET request_body = NULL, response_body = NULL, response_search_text = NULL WHERE rowid IN (
           SELECT rowid FROM requests INDEXED BY requests_with_body
           WHERE created_at < ? AND (request_body IS NOT NULL OR response_body IS NOT NULL) LIMIT ?)`,
      );
      while (strip.run(toIso(bodiesBefore), PRUNE_CHUNK).changes === PRUNE_CHUNK);
    }
    this.stmt<[string]>('DELETE FROM key_spend WHERE hour < ?').run(spendBefore(before));
    return { deleted };
  }

  async count(): Promise<number> {
    return this.stmt<[], { n: number }>('SELECT COUNT(*) AS n FROM requests').get()!.n;
  }

  async spendSince(keyId: string, since: string): Promise<number> {
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

  private dialect(params: (string | number)[]) {
    return {
      bind(value: string | number) {
        params.push(value);
        return '?';
      },
      propertyEquals: (name: string, value: string) =>
        `EXISTS (SELECT 1 FROM json_each(requests.properties) WHERE key = ${name} AND value = ${value})`,
      // FTS5: every word, each a quoted string (so no word is read as query syntax); all must match.
      search: (words: string[]) => {
        params.push(words.map((w) => `"${w}"`).join(' '));
        return 'rowid IN (SELECT rowid FROM requests_fts WHERE requests_fts MATCH ?)';
      },
    };
  }
}

/**
 * LogStore on PostgreSQL. A batch is one INSERT … SELECT FROM unnest(column arrays): one round trip and a
 * fixed 36 parameters whatever the batch size (a VALUES list would hit the 65,535-parameter limit).
 */
import type pg from 'pg';
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
  scanSearchSql,
  searchGroups,
  decodeCursor,
  encodeEach,
  encodeCursor,
  idsBefore,
  idsFrom,
  spendBefore,
  NANOS_PER_USD,
  scopeWhere,
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
  type RequestSort,
  type RequestSummary,
  type SpendEntry,
} from '../types.js';
import { inTransaction, isoOrNull, pgErrorCode, resolvePool, runPgMigrations } from './db.js';
import { BIGINT_COLUMNS, LOG_MIGRATIONS, PG_COLUMN_TYPES } from './log-schema.js';
import { pgBatchStore } from './batches.js';
import { dialect } from './log-dialect.js';
import { pgSessionReads } from './sessions.js';
import { fillOneDay, pgUsageReads, pruneRollup } from './usage-rollup.js';
import { ROLLUP_MIN_ROWS } from '../usage-rollup.js';
import { applyPgLogSearch, hasSearchColumn } from './log-search.js';
import type { BatchStore } from '../batch-types.js';

type Row = Record<string, unknown>;
type Value = string | number | boolean | null;

const PRUNE_CHUNK = 10_000;
const INSERT_SQL = `INSERT INTO requests (${LOG_COLUMNS.join(', ')})
  SELECT * FROM unnest(${LOG_COLUMNS.map((c, i) => `$${i + 1}::${PG_COLUMN_TYPES[c]}[]`).join(', ')})
  ON CONFLICT (id) DO NOTHING`;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * PostgreSQL text cannot hold NUL and jsonb refuses NUL and lone surrogates; a decoded binary body can
 * contain either. They become U+FFFD instead of costing the row.
 */
function cleanText(s: string): string {
  return s.includes('\0') ? s.replace(/\0/g, '\uFFFD') : s;
}

function cleanJson(obj: Record<string, unknown>): string {
  const clean = (v: string) => cleanText(v).replace(LONE_SURROGATE, '\uFFFD');
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[clean(k)] = typeof v === 'string' ? clean(v) : v;
  return JSON.stringify(out);
}

/** The table takes any provider text (named upstreams are configuration): a row's is checked here. */

function encodeRow(r: RequestLogRow): Value[] {
  const jsonCols: ReadonlySet<string> = new Set(JSON_COLUMNS);
  const nullableJson: ReadonlySet<string> = new Set(NULLABLE_JSON_COLUMNS);
  return LOG_COLUMNS.map((c): Value => {
    if (c === 'created_at') return toIso(r.created_at);
    if (c === 'provider' && !PROVIDER_NAME.test(r.provider))
      throw new RangeError(`provider cannot be ${JSON.stringify(r.provider)}`);
    if (jsonCols.has(c)) {
      const v = r[c as (typeof JSON_COLUMNS)[number]];
      if (typeof v !== 'object' || v === null) throw new TypeError(`${c} must be an object`);
      return cleanJson(v);
    }
    if (nullableJson.has(c)) {
      const v = r[c as (typeof NULLABLE_JSON_COLUMNS)[number]];
      return v == null ? null : JSON.stringify(v);
    }
    const v = r[c] as Value | undefined;
    if (v === undefined) return null;
    if (typeof v === 'bigint') throw new TypeError(`${c} is a bigint`);
    return typeof v === 'string' ? cleanText(v) : v;
  });
}

function decodeRow<T>(row: Row): T {
  row.created_at = isoOrNull(row.created_at);
  for (const c of BIGINT_COLUMNS) if (c in row && row[c] !== null) row[c] = Number(row[c]);
  for (const c of BOOL_COLUMNS) if (c in row) row[c] = Boolean(row[c]);
  return row as T;
}

/** SQLSTATE classes that belong to one row (bad data, constraint, oversized index entry), not the server. */
function isRowError(err: unknown): boolean {
  if (err instanceof TypeError || err instanceof RangeError) return true;
  const code = pgErrorCode(err);
  return code.startsWith('22') || code.startsWith('23') || code === '54000';
}

function columnsOf(encoded: readonly Value[][]): Value[][] {
  return LOG_COLUMNS.map((_, i) => encoded.map((row) => row[i]!));
}

/** Newest rows a search reads in order before it asks the full-text index instead (see listRequests). */
const SEARCH_WINDOW = 300;

export interface PgLogStoreOptions {
  /** KEYRELAY_LOG_SEARCH: keep the full-text index (default true). Applied by migrate(). */
  search?: boolean;
  /** Characters of each body the index reads (DEFAULT_LOG_SEARCH.bodyChars). Applied by migrate(). */
  searchBodyChars?: number;
  /** Newest rows one page of search reads when there is no index (DEFAULT_SEARCH_SCAN_ROWS). */
  searchScanRows?: number;
  /** Told when migrate() drops, rebuilds or keeps an older index (a rebuild delays the start). */
  onSearchIndex?: (msg: string) => void;
  /** Ranges with fewer rows are summed from the rows rather than the usage rollup (ROLLUP_MIN_ROWS). */
  rollupMinRows?: number;
}

export class PgLogStore implements LogStore {
  private readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly search: { enabled: boolean; bodyChars: number };
  private readonly scanRows: number;
  private readonly onSearchIndex: ((msg: string) => void) | undefined;

  /** A URL gives the store its own pool (ended by close()); a pool passed in stays the caller's. */
  constructor(poolOrUrl: pg.Pool | string, opts: PgLogStoreOptions = {}) {
    const { pool, owned } = resolvePool(poolOrUrl);
    this.pool = pool;
    this.ownsPool = owned;
    this.search = { enabled: opts.search ?? true, bodyChars: opts.searchBodyChars ?? 8192 };
    this.scanRows = Math.max(1, Math.floor(opts.searchScanRows ?? DEFAULT_SEARCH_SCAN_ROWS));
    this.onSearchIndex = opts.onSearchIndex;
    const batches = pgBatchStore(pool);
    this.upsertBatch = batches.upsertBatch;
    this.batchByOutputFile = batches.batchByOutputFile;
    this.claimBatchResults = batches.claimBatchResults;
    this.listBatches = batches.listBatches;
    const sessions = pgSessionReads(pool, (r) => decodeRow<RequestSummary>(r));
    this.listSessions = sessions.listSessions;
    this.sessionCalls = sessions.sessionCalls;
    const usage = pgUsageReads(pool, sessions.usageSeriesSplit, opts.rollupMinRows ?? ROLLUP_MIN_ROWS);
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
    await runPgMigrations(this.pool, 'log', LOG_MIGRATIONS);
    await applyPgLogSearch(this.pool, this.search, this.onSearchIndex);
  }

  async close(): Promise<void> {
    if (this.ownsPool && !this.pool.ended) await this.pool.end();
  }

  async insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult> {
    const { encoded, rejected: refused } = encodeEach(rows, encodeRow, isRowError);
    let rejected = refused;
    if (encoded.length === 0) return { inserted: 0, rejected };
    try {
      const res = await this.pool.query(INSERT_SQL, columnsOf(encoded));
      return { inserted: res.rowCount ?? 0, rejected };
    } catch (err) {
      if (!isRowError(err)) throw err;
    }
    // One poison row must not sink the batch: redo it row by row in one transaction, a savepoint per row.
    let inserted = 0;
    await inTransaction(this.pool, async (client) => {
      for (const row of encoded) {
        await client.query('SAVEPOINT row');
        try {
          inserted += (await client.query(INSERT_SQL, columnsOf([row]))).rowCount ?? 0;
          await client.query('RELEASE SAVEPOINT row');
        } catch (err) {
          if (!isRowError(err)) throw err;
          await client.query('ROLLBACK TO SAVEPOINT row');
          rejected++;
        }
      }
    });
    return { inserted, rejected };
  }

  async listRequests(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null; sort?: RequestSort },
  ): Promise<Page<RequestSummary>> {
    const limit = Math.max(1, Math.floor(opts.limit));
    const sort = opts.sort ?? NEWEST_FIRST;
    const newestFirst = sort.by === 'time' && sort.dir === 'desc';
    const words = f.search === undefined ? [] : searchGroups(f.search);
    // Asked each time rather than remembered: another instance may have started with the other setting.
    if (words.length > 0 && !(await hasSearchColumn(this.pool))) {
      if (!newestFirst) throw domainError('invalid_sort');
      return this.scanSearch(f, words, opts);
    }
    let rows: Row[] | null = null;
    // The window holds the newest rows: it answers for newest first only.
    if (words.length > 0 && newestFirst) {
      // A frequent word: the account's newest rows, read in id order, fill a page long before the GIN index
      // has listed every match (tens of thousands). So look in a bounded window of the newest rows first; a
      // full page there is exactly the newest matches. Otherwise (a rare word) the index answers below.
      const params: unknown[] = [];
      const d = dialect(params);
      let where = buildWhere({ ...f, search: undefined }, d);
      if (opts.cursor) where += ` AND id < ${d.bind(decodeCursor(opts.cursor))}`;
      const sql = `SELECT ${SUMMARY_COLUMNS.join(', ')} FROM (
          SELECT * FROM requests WHERE ${where} ORDER BY id DESC LIMIT ${d.bind(SEARCH_WINDOW)}
        ) recent WHERE ${d.search(words)} ORDER BY id DESC LIMIT ${d.bind(limit + 1)}`;
      const found = (await this.pool.query<Row>(sql, params)).rows;
      if (found.length > limit) rows = found;
    }
    if (!rows) {
      const params: unknown[] = [];
      const d = dialect(params);
      const sql = pageSql(SUMMARY_COLUMNS.join(', '), f, d, sort, opts.cursor, limit + 1, 'IS');
      rows = (await this.pool.query<Row>(sql, params)).rows;
    }
    const items = rows.slice(0, limit).map((r) => decodeRow<RequestSummary>(r));
    const more = rows.length > limit;
    return { items, next_cursor: more && items.length ? pageCursor(sort, items[items.length - 1]!) : null };
  }

  /**
   * Search with no full-text index: the newest `scanRows` rows that pass the other filters (from the cursor
   * on), newest first, until a page of matches (PostgreSQL stops reading there). A window read to its end
   * without filling the page still returns a cursor (its oldest row), so "more" continues the scan.
   */
  private async scanSearch(
    f: RequestFilter,
    words: string[][],
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<RequestSummary>> {
    const limit = Math.max(1, Math.floor(opts.limit));
    const params: unknown[] = [];
    const d = dialect(params);
    let where = buildWhere({ ...f, search: undefined }, d);
    if (opts.cursor) where += ` AND id < ${d.bind(decodeCursor(opts.cursor))}`;
    const windowSql = `SELECT * FROM requests WHERE ${where} ORDER BY id DESC LIMIT ${d.bind(this.scanRows)}`;
    const windowParams = [...params];
    const hit = scanSearchSql(words, (v) => d.bind(v), 'ILIKE');
    const found = (
      await this.pool.query<Row>(
        `SELECT ${SUMMARY_COLUMNS.join(', ')} FROM (${windowSql}) recent WHERE ${hit}
         ORDER BY id DESC LIMIT ${d.bind(limit + 1)}`,
        params,
      )
    ).rows;
    const items = found.slice(0, limit).map((r) => decodeRow<RequestSummary>(r));
    let next: string | null = null;
    if (found.length > limit) next = items[items.length - 1]!.id;
    else {
      const { rows } = await this.pool.query<{ n: string; last: string | null }>(
        `SELECT count(*) AS n, min(id) AS last FROM (${windowSql.replace('SELECT *', 'SELECT id')}) recent`,
        windowParams,
      );
      if (Number(rows[0]!.n) === this.scanRows) next = rows[0]!.last;
    }
    return { items, next_cursor: next === null ? null : encodeCursor(next) };
  }

  async getRequest(scope: string | RequestScope, id: string): Promise<RequestLogRow | null> {
    const params: string[] = [id];
    const where = scopeWhere(scope, { bind: (v) => `$${params.push(String(v))}` });
    const { rows } = await this.pool.query<Row>(
      `SELECT ${DETAIL_COLUMNS.join(', ')} FROM requests WHERE id = $1 AND ${where}`,
      params,
    );
    return rows[0] ? decodeRow<RequestLogRow>(rows[0]) : null;
  }

  async listRecent(opts: { limit: number; account_id?: string }): Promise<RequestSummary[]> {
    const limit = Math.max(1, Math.floor(opts.limit));
    const cols = SUMMARY_COLUMNS.join(', ');
    const { rows } =
      opts.account_id === undefined
        ? await this.pool.query<Row>(`SELECT ${cols} FROM requests ORDER BY id DESC LIMIT $1`, [limit])
        : await this.pool.query<Row>(
            `SELECT ${cols} FROM requests WHERE account_id = $1 ORDER BY id DESC LIMIT $2`,
            [opts.account_id, limit],
          );
    return rows.map((r) => decodeRow<RequestSummary>(r));
  }

  /** Adds the newest day the usage rollup lacks (LogStore.fillUsageRollup). */
  fillUsageRollup(): Promise<boolean> {
    return fillOneDay(this.pool);
  }

  async pricingGaps(from: string, to: string): Promise<PricingGapRow[]> {
    // Along the primary key: ids start with their time (log-query.ts, ID_TIME_SLACK_MS).
    const { rows } = await this.pool.query<PricingGapRow & { requests: string }>(
      `SELECT provider, model, price_source, count(*) AS requests FROM requests
       WHERE id >= $1 AND id < $2 AND created_at >= $3 AND created_at < $4
         AND (price_source LIKE 'unpriced:%' OR price_source LIKE 'partial:%')
       GROUP BY provider, model, price_source ORDER BY 4 DESC, provider, model LIMIT $5`,
      [idsFrom(from), idsBefore(to), toIso(from), toIso(to), PRICING_GAP_GROUPS],
    );
    return rows.map((r) => ({ ...r, requests: Number(r.requests) }));
  }

  async loggedCosts(from: string, to: string, providers: readonly string[]): Promise<LoggedCostRow[]> {
    if (providers.length === 0) return [];
    const { rows } = await this.pool.query<Record<keyof LoggedCostRow, string | number | null>>(
      `SELECT ${LOGGED_COST_SQL} FROM requests
       WHERE id >= $1 AND id < $2 AND created_at >= $3 AND created_at < $4 AND provider = ANY($5::text[])
       GROUP BY 1, 2, 3 ORDER BY cost_usd DESC, 1, 2, 3 LIMIT $6`,
      [idsFrom(from), idsBefore(to), toIso(from), toIso(to), [...providers], LOGGED_COST_GROUPS],
    );
    return rows.map(toLoggedCost);
  }

  async prune(before: string, bodies: readonly BodyCutoff[] = []): Promise<{ deleted: number }> {
    // The rollup first: a read meanwhile takes the days losing rows from the rows, never from stale sums.
    await pruneRollup(this.pool, before);
    // Bounded chunks, each its own transaction: short locks, and WAL/vacuum work spread out.
    let deleted = 0;
    let n: number;
    do {
      // Oldest first, along the primary key: ids start with their time (log-query.ts, ID_TIME_SLACK_MS).
      const res = await this.pool.query(
        `DELETE FROM requests WHERE id IN (
           SELECT id FROM requests WHERE id < $1 AND created_at < $2 ORDER BY id LIMIT $3)`,
        [idsBefore(before), toIso(before), PRUNE_CHUNK],
      );
      n = res.rowCount ?? 0;
      deleted += n;
    } while (n === PRUNE_CHUNK);
    for (const cut of bodies) {
      do {
        const res = await this.pool.query(
          `UPDATE requests SET request_body = NULL, response_body = NULL, response_search_text = NULL WHERE id IN (
             SELECT id FROM requests
             WHERE created_at < $1 AND account_id = $2 AND (request_body IS NOT NULL OR response_body IS NOT NULL)
             LIMIT $3)`,
          [toIso(cut.before), cut.account_id, PRUNE_CHUNK],
        );
        n = res.rowCount ?? 0;
      } while (n === PRUNE_CHUNK);
    }
    await this.pool.query('DELETE FROM key_spend WHERE hour < $1', [spendBefore(before)]);
    return { deleted };
  }

  async count(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM requests');
    return Number(rows[0]!.n);
  }

  async spendSince(keyId: string, since: string, endUser?: string): Promise<number> {
    if (endUser !== undefined) {
      // Through (key_id, end_user, id): that end user's rows of the period alone.
      const { rows } = await this.pool.query<{ s: number }>(
        `SELECT COALESCE(SUM(cost_usd), 0)::double precision AS s FROM requests
         WHERE key_id = $1 AND end_user = $2 AND id >= $3 AND created_at >= $4`,
        [keyId, endUser, idsFrom(since), toIso(since)],
      );
      return rows[0]!.s;
    }
    const { rows } = await this.pool.query<{ s: number }>(
      // The period alone, through (key_id, id): ids start with their time (log-query.ts, ID_TIME_SLACK_MS).
      `SELECT COALESCE(SUM(cost_usd), 0)::double precision AS s FROM requests
       WHERE key_id = $1 AND id >= $2 AND created_at >= $3`,
      [keyId, idsFrom(since), toIso(since)],
    );
    const hourly = await this.pool.query<{ n: string }>(
      'SELECT COALESCE(SUM(cost_nanos), 0)::text AS n FROM key_spend WHERE key_id = $1 AND hour >= $2',
      [keyId, toIso(since)],
    );
    return rows[0]!.s + Number(hourly.rows[0]!.n) / NANOS_PER_USD;
  }

  async addSpend(entries: readonly SpendEntry[]): Promise<void> {
    if (entries.length === 0) return;
    // One statement: the entries arrive one per key and hour, so no row is updated twice in it.
    await this.pool.query(
      `INSERT INTO key_spend (key_id, hour, cost_nanos)
       SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[])
       ON CONFLICT (key_id, hour) DO UPDATE SET cost_nanos = key_spend.cost_nanos + excluded.cost_nanos`,
      [entries.map((e) => e.key_id), entries.map((e) => toIso(e.hour)), entries.map((e) => String(e.nanos))],
    );
  }
}

/**
 * What both log stores share: the column list, the filter → WHERE translation, the opaque cursor and the
 * percentile definition (PostgreSQL's percentile_cont, so both backends report the same numbers).
 */
import { idFloor } from '../ids.js';
import type { RequestLogRow } from '../types.js';
import { domainError } from '../errors.js';
import type {
  BreakdownBy,
  BreakdownRank,
  LoggedCostRow,
  RequestFilter,
  RequestScope,
  RequestSort,
  RequestSummary,
  UsageBreakdownRow,
  UsagePoint,
} from './types.js';

export const LOG_COLUMNS = [
  'id',
  'created_at',
  'key_id',
  'account_id',
  'org_id',
  'provider',
  'method',
  'path',
  'model',
  'stream',
  'status',
  'outcome',
  'error_code',
  'latency_ms',
  'ttfb_ms',
  'input_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'output_tokens',
  'reasoning_tokens',
  'usage_source',
  'cost_usd',
  'price_source',
  'end_user',
  'session',
  'properties',
  'request_bytes',
  'response_bytes',
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_body_truncated',
  'response_body_truncated',
  'client_ip',
  'user_agent',
  'credential_fingerprint',
  'connection_id',
  'input_audio_tokens',
  'cache_read_audio_tokens',
  'output_audio_tokens',
  'ws_messages_in',
  'ws_messages_out',
  'ws_close_code',
  'ws_close_reason',
  'error_message',
  'response_search_text',
  'tool_uses',
] as const satisfies readonly (keyof RequestLogRow)[];

export type LogColumn = (typeof LOG_COLUMNS)[number];

const DETAIL_ONLY = new Set<LogColumn>([
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
]);
/** Search's own copy of a stream's text (RequestLogRow.response_search_text): stored, never read back. */
const SEARCH_ONLY = new Set<LogColumn>(['response_search_text']);
export const DETAIL_COLUMNS = LOG_COLUMNS.filter((c) => !SEARCH_ONLY.has(c));
export const SUMMARY_COLUMNS = DETAIL_COLUMNS.filter((c) => !DETAIL_ONLY.has(c));
export const BOOL_COLUMNS = ['stream', 'request_body_truncated', 'response_body_truncated'] as const;
export const JSON_COLUMNS = ['properties', 'request_headers', 'response_headers'] as const;
/** JSON objects that may be null (stored as SQL NULL). */
export const NULLABLE_JSON_COLUMNS = ['tool_uses'] as const;

export interface WhereDialect {
  /** Registers a bound value and returns its placeholder. */
  bind(value: string | number): string;
  /** SQL true when properties[name] = value, given the two placeholders. */
  propertyEquals(nameParam: string, valueParam: string): string;
  /** SQL true when the row has the property at all, given the name's placeholder. */
  propertyPresent(nameParam: string): string;
  /**
   * SQL true when the row's full-text index matches any group, a group when it holds all of its words
   * (unbound; the dialect binds them).
   */
  search(groups: string[][]): string;
}

/** A search reads at most this many words: enough for any phrase, and a bound on the query it builds. */
const MAX_SEARCH_WORDS = 16;

/** The words of a search box, as both stores' indexes split text: letters and digits, lower case. */
export function searchWords(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).slice(0, MAX_SEARCH_WORDS);
}

/**
 * A search box's text as alternatives: `OR` (in capitals, between words) separates them, `AND` is what
 * words do anyway and is dropped; each alternative's words must all match. Operators with no words beside
 * them (a search for `OR` alone) are taken as words.
 */
export function searchGroups(text: string): string[][] {
  const groups: string[][] = [[]];
  let words = 0;
  for (const token of text.split(/\s+/)) {
    if (token === 'OR') groups.push([]);
    else if (token !== 'AND') {
      const found = searchWords(token).slice(0, MAX_SEARCH_WORDS - words);
      words += found.length;
      groups[groups.length - 1]!.push(...found);
    }
  }
  const usable = groups.filter((g) => g.length > 0);
  return usable.length > 0 ? usable : searchWords(text).length > 0 ? [searchWords(text)] : [];
}

/** The columns search looks in, on both stores, with or without a full-text index. */
export const SEARCH_COLUMNS = [
  'model',
  'path',
  'end_user',
  'session',
  'request_body',
  'response_body',
  'response_search_text',
] as const;

/**
 * Newest rows one page of search reads when the store has no full-text index (KEYRELAY_LOG_SEARCH=false):
 * bounds what a search costs the database (a page may come back short, with a cursor to go on).
 */
export const DEFAULT_SEARCH_SCAN_ROWS = 10_000;

/**
 * Search without an index: every word must occur, case-insensitively, in one of SEARCH_COLUMNS. A plain
 * substring test, so it also finds a word inside a longer one ("cat" in "concatenate"); SQLite's LIKE folds
 * only ASCII letters' case, PostgreSQL's ILIKE all of them. Words are letters and digits only, so none
 * holds a LIKE wildcard.
 */
export function scanSearchSql(
  groups: string[][],
  bind: (v: string) => string,
  like: 'LIKE' | 'ILIKE',
): string {
  const all = (words: string[]) =>
    words
      .map((w) => `(${SEARCH_COLUMNS.map((c) => `${c} ${like} ${bind(`%${w}%`)}`).join(' OR ')})`)
      .join(' AND ');
  return groups.map((g) => `(${all(g)})`).join(' OR ');
}

/** The WHERE terms of a scope: its organization, its account, or both; never neither. */
export function scopeWhere(scope: string | RequestScope, d: Pick<WhereDialect, 'bind'>): string {
  const s: RequestScope = typeof scope === 'string' ? { account_id: scope } : scope;
  const parts: string[] = [];
  if (s.org_id !== undefined) parts.push(`org_id = ${d.bind(s.org_id)}`);
  if (s.account_id !== undefined) parts.push(`account_id = ${d.bind(s.account_id)}`);
  if (parts.length === 0) throw new Error('a request read must be scoped to an organization or an account');
  return parts.join(' AND ');
}

/** Every filter of RequestFilter, ANDed; always scoped to an organization or an account. */
export function buildWhere(f: RequestFilter, d: WhereDialect): string {
  const parts = [scopeWhere(f, d)];
  const eq = (column: string, value: string | number | undefined) => {
    if (value !== undefined) parts.push(`${column} = ${d.bind(value)}`);
  };
  eq('key_id', f.key_id);
  if (f.exclude_key_ids?.length)
    parts.push(`(key_id IS NULL OR key_id NOT IN (${f.exclude_key_ids.map((id) => d.bind(id)).join(', ')}))`);
  eq('provider', f.provider);
  eq('model', f.model);
  if (f.model_contains !== undefined) {
    const pattern = `%${f.model_contains.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    parts.push(`LOWER(model) LIKE ${d.bind(pattern)} ESCAPE '\\'`);
  }
  eq('status', f.status);
  eq('outcome', f.outcome);
  eq('end_user', f.end_user);
  eq('session', f.session);
  eq('connection_id', f.connection_id);
  eq('credential_fingerprint', f.credential_fingerprint);
  if (f.from !== undefined) {
    const from = toFilterTime(f.from);
    parts.push(`id >= ${d.bind(idsFrom(from))}`, `created_at >= ${d.bind(from)}`);
  }
  if (f.to !== undefined) {
    const to = toFilterTime(f.to);
    parts.push(`id < ${d.bind(idsBefore(to))}`, `created_at < ${d.bind(to)}`);
  }
  if (f.property?.value === undefined) {
    if (f.property) parts.push(d.propertyPresent(d.bind(f.property.name)));
  } else parts.push(d.propertyEquals(d.bind(f.property.name), d.bind(f.property.value)));
  if (f.search !== undefined) {
    const groups = searchGroups(f.search);
    if (groups.length > 0) parts.push(d.search(groups));
  }
  return parts.join(' AND ');
}

function toFilterTime(value: string): string {
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw domainError('invalid_time', `Not an ISO-8601 time: ${value}`);
  return new Date(t).toISOString();
}

/**
 * The log has no index on created_at: a row's id starts with its time (ids.ts), so time ranges are id ranges
 * on the (account_id, id) index and retention walks the primary key. A row keyrelay writes now has the same
 * millisecond in both (`newTimedId`); rows written before that took the two readings a moment apart (id
 * first, in consecutive statements). The id range is widened by this much each way and created_at decides,
 * so a range stays exact for any row whose two times are less than a minute apart.
 */
export const ID_TIME_SLACK_MS = 60_000;

/** The id bound below which every row created before `before` lies (time filters' `to`, retention). */
export function idsBefore(before: string): string {
  return idFloor(Date.parse(before) + ID_TIME_SLACK_MS);
}

/** The id bound at or above which every row created at or after `since` lies (`from`, a budget's spend). */
export function idsFrom(since: string): string {
  return idFloor(Date.parse(since) - ID_TIME_SLACK_MS);
}

/** Spend is added up in integer nanodollars: many tiny costs (and Redis INCRBY across instances) stay exact. */
export const NANOS_PER_USD = 1e9;

/**
 * Hourly spend (LogStore.addSpend) is kept at least this long, whatever the log's retention: a budget reads
 * its calendar month at most, and a bucket is one row a key and an hour.
 */
export const SPEND_KEEP_MS = 62 * 86_400_000;

/** Buckets of hourly spend starting before this go with retention's `before` (never within SPEND_KEEP_MS). */
export function spendBefore(before: string, now = Date.now()): string {
  return new Date(Math.min(Date.parse(before), now - SPEND_KEEP_MS)).toISOString();
}

export const NEWEST_FIRST: RequestSort = { by: 'time', dir: 'desc' };

/**
 * How a store's planner matches a test of an index's boolean term, `(cost_usd IS NULL)`: SQLite as an
 * equality (`= FALSE`); PostgreSQL as a boolean test (`IS FALSE`: it folds `= FALSE` into `IS NOT NULL`,
 * which no index term is).
 */
export type FlagTest = '=' | 'IS';

/** Each sort key's value per row; ties are broken by id in the same direction. Only cost can be null. */
const SORT_VALUE: Record<Exclude<RequestSort['by'], 'time'>, string> = {
  cost: 'cost_usd',
  tokens: '(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))',
  latency: 'latency_ms',
};

/**
 * One page's SELECT (at most `limit` rows) under `sort`, after `cursor`: keyset pagination, so a page never
 * repeats or skips a row while rows are added. Each order is one of the organization's sort indexes read
 * from the cursor on (log migration 14), never a sort of every row: the order is exactly the index's, and
 * the cursor a row-value bound on it. Unpriced costs come last in either direction, which no one index
 * order gives for both: priced rows (`(cost_usd IS NULL) = FALSE`, an equality on the index's first
 * term) then unpriced ones, each branch an index range, their union sorted (at most 2 × limit rows).
 * The filter's WHERE is written once per branch, each binding its own placeholders in the order they appear.
 * A sorted cursor carries the last row's value and id; a time cursor its id alone.
 */
export function pageSql(
  columns: string,
  f: RequestFilter,
  d: WhereDialect,
  sort: RequestSort,
  cursor: string | null | undefined,
  limit: number,
  flagTest: FlagTest,
): string {
  const bind = (v: string | number) => d.bind(v);
  const where = () => buildWhere(f, d);
  const dir = sort.dir === 'asc' ? 'ASC' : 'DESC';
  const op = sort.dir === 'asc' ? '>' : '<';
  // The condition is a function too: placeholders may be positional, so each is bound where it is written.
  const select = (cond: () => string, order: string) =>
    `SELECT ${columns} FROM requests WHERE ${where()}${cond()} ORDER BY ${order} LIMIT ${bind(limit)}`;
  if (sort.by === 'time') {
    return select(() => (cursor ? ` AND id ${op} ${bind(decodeCursor(cursor))}` : ''), `id ${dir}`);
  }
  const v = SORT_VALUE[sort.by];
  const after = cursor ? decodeSortCursor(cursor) : null;
  const past = (value: number, id: string) => ` AND (${v}, id) ${op} (${bind(value)}, ${bind(id)})`;
  if (sort.by !== 'cost') {
    // Never null (latency_ms is NOT NULL, tokens coalesced): the index's order as is.
    if (after?.[0] === null) throw domainError('invalid_cursor');
    return select(() => (after ? past(after[0]!, after[1]) : ''), `${v} ${dir}, id ${dir}`);
  }
  const flag = (isNull: boolean) => ` AND (${v} IS NULL) ${flagTest} ${isNull ? 'TRUE' : 'FALSE'}`;
  // The unpriced run in the index's order too: every cost in it is NULL, so (cost, id) is id order.
  const order = `${v} ${dir}, id ${dir}`;
  const unpriced = (cond: () => string) => select(() => `${flag(true)} AND ${v} IS NULL${cond()}`, order);
  // A cursor in the unpriced rows: the priced ones are all behind it.
  if (after && after[0] === null) return unpriced(() => ` AND id ${op} ${bind(after[1])}`);
  const priced = select(() => `${flag(false)}${after ? past(after[0]!, after[1]) : ''}`, order);
  const rest = unpriced(() => '');
  return `SELECT * FROM (SELECT * FROM (${priced}) priced UNION ALL SELECT * FROM (${rest}) unpriced) page
    ORDER BY (${v} IS NULL), ${v} ${dir}, id ${dir} LIMIT ${bind(limit)}`;
}

/** The cursor after a page's last row, under its sort. */
export function pageCursor(sort: RequestSort, last: RequestSummary): string {
  if (sort.by === 'time') return encodeCursor(last.id);
  const value =
    sort.by === 'cost'
      ? last.cost_usd
      : sort.by === 'latency'
        ? last.latency_ms
        : (last.input_tokens ?? 0) + (last.output_tokens ?? 0);
  return Buffer.from(JSON.stringify([value, last.id]), 'utf8').toString('base64url');
}

function decodeSortCursor(cursor: string): [number | null, string] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw domainError('invalid_cursor');
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    !(parsed[0] === null || (typeof parsed[0] === 'number' && Number.isFinite(parsed[0]))) ||
    typeof parsed[1] !== 'string' ||
    !/^[0-9A-Za-z]{1,64}$/.test(parsed[1])
  )
    throw domainError('invalid_cursor');
  return [parsed[0] as number | null, parsed[1]];
}

/** The cursor is the last id of the page; base64url keeps it opaque to clients. */
export function encodeCursor(lastId: string): string {
  return Buffer.from(lastId, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[0-9A-Za-z]{1,64}$/.test(id)) throw domainError('invalid_cursor');
  return id;
}

/**
 * The numbers of group_concat's comma-separated text, sorted. Sliced at each comma into a typed array: a
 * month's breakdown hands over a million latencies, and split() first built an array of a million strings
 * (292 → 156 ms for a million).
 */
export function sortedNumbers(text: string): Float64Array {
  const out = new Float64Array(Math.floor(text.length / 2) + 1);
  let n = 0;
  let start = 0;
  for (let i = text.indexOf(','); i !== -1; i = text.indexOf(',', start)) {
    out[n++] = +text.slice(start, i);
    start = i + 1;
  }
  out[n++] = +text.slice(start);
  return out.subarray(0, n).sort();
}

/** percentile_cont: linear interpolation between the two nearest ranks of the sorted values. */
export function percentileCont(sorted: ArrayLike<number>, p: number): number | null {
  if (sorted.length === 0) return null;
  const pos = p * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo]!;
  const b = sorted[hi]!;
  return lo === hi ? a : a + (b - a) * (pos - lo);
}

/** Each rank's value of a breakdown's group (LogStore.usageTop). */
export const RANK_VALUE: Record<
  BreakdownRank,
  (r: Pick<UsagePoint, 'requests' | 'cost_usd' | 'input_tokens' | 'output_tokens'>) => number
> = {
  requests: (r) => r.requests,
  cost: (r) => r.cost_usd,
  tokens: (r) => r.input_tokens + r.output_tokens,
};

/** The first `limit` of breakdown rows (in sortBreakdown's order) by `rank`; ties keep that order. */
export function topGroups(
  rows: UsageBreakdownRow[],
  rank: BreakdownRank,
  limit: number,
): { rows: UsageBreakdownRow[]; total_groups: number } {
  const value = RANK_VALUE[rank];
  const ranked = rank === 'requests' ? rows : [...rows].sort((a, b) => value(b) - value(a));
  return { rows: ranked.slice(0, limit), total_groups: rows.length };
}

/** Breakdown rows in one deterministic order on both backends: most requests first, then by group. */
export function sortBreakdown(rows: UsageBreakdownRow[]): UsageBreakdownRow[] {
  return rows.sort((x, y) => y.requests - x.requests || (x.group < y.group ? -1 : x.group > y.group ? 1 : 0));
}

/** Aggregate columns both backends select, with the same names, for series and breakdowns. */
export const AGGREGATE_SQL = `
  COUNT(*) AS requests,
  SUM(CASE WHEN status >= 400 OR outcome <> 'ok' THEN 1 ELSE 0 END) AS errors,
  COALESCE(SUM(input_tokens), 0) AS input_tokens,
  COALESCE(SUM(output_tokens), 0) AS output_tokens,
  COALESCE(SUM(cache_read_tokens), 0) AS cache_read_tokens,
  COALESCE(SUM(cost_usd), 0) AS cost_usd,
  SUM(CASE WHEN cost_usd IS NULL AND (price_source IS NULL OR price_source NOT LIKE 'not billed%')
    THEN 1 ELSE 0 END) AS unknown_cost_requests,
  SUM(CASE WHEN price_source LIKE 'partial:%' THEN 1 ELSE 0 END) AS partial_cost_requests`;

/**
 * loggedCosts' select list, the same on both stores (price_source as in AGGREGATE_SQL); its first three
 * columns are the groups (PostgreSQL's query groups and orders by their positions).
 */
export const LOGGED_COST_SQL = `
  provider, model, credential_fingerprint, COUNT(*) AS requests,
  COALESCE(SUM(input_tokens), 0) AS input_tokens,
  COALESCE(SUM(cache_read_tokens), 0) AS cache_read_tokens,
  COALESCE(SUM(cache_write_tokens), 0) AS cache_write_tokens,
  COALESCE(SUM(output_tokens), 0) AS output_tokens,
  COALESCE(SUM(cost_usd), 0) AS cost_usd,
  SUM(CASE WHEN price_source LIKE 'unpriced:%' THEN 1 ELSE 0 END) AS unpriced_requests,
  SUM(CASE WHEN price_source LIKE 'partial:%' THEN 1 ELSE 0 END) AS partial_requests`;

/** A loggedCosts row as either driver reads it (PostgreSQL's sums are text). */
export function toLoggedCost(r: Record<keyof LoggedCostRow, string | number | null>): LoggedCostRow {
  return {
    provider: String(r.provider),
    model: r.model === null ? null : String(r.model),
    credential_fingerprint: r.credential_fingerprint === null ? null : String(r.credential_fingerprint),
    requests: Number(r.requests),
    input_tokens: Number(r.input_tokens),
    cache_read_tokens: Number(r.cache_read_tokens),
    cache_write_tokens: Number(r.cache_write_tokens),
    output_tokens: Number(r.output_tokens),
    cost_usd: Number(r.cost_usd),
    unpriced_requests: Number(r.unpriced_requests),
    partial_requests: Number(r.partial_requests),
  };
}

export type AggregateRow = Record<
  | 'requests'
  | 'errors'
  | 'input_tokens'
  | 'output_tokens'
  | 'cache_read_tokens'
  | 'cost_usd'
  | 'unknown_cost_requests'
  | 'partial_cost_requests',
  number | string
>;

/** Turns an aggregate row (bigint/numeric may arrive as strings from pg) into the numeric UsagePoint fields. */
export function toUsageNumbers(
  r: AggregateRow,
  p50: number | null,
  p95: number | null,
): Omit<UsagePoint, 'bucket'> {
  return {
    requests: Number(r.requests),
    errors: Number(r.errors),
    input_tokens: Number(r.input_tokens),
    output_tokens: Number(r.output_tokens),
    cache_read_tokens: Number(r.cache_read_tokens),
    cost_usd: Number(r.cost_usd),
    unknown_cost_requests: Number(r.unknown_cost_requests),
    partial_cost_requests: Number(r.partial_cost_requests),
    latency_p50_ms: p50 === null ? null : Number(p50),
    latency_p95_ms: p95 === null ? null : Number(p95),
  };
}

/** Rows with no model (e.g. refused before the body was read) are grouped under this label. */
export const NO_MODEL_GROUP = '';

/**
 * The SQL a breakdown groups by, on both stores: a column (rows without a value under ''), or a property's
 * value, which the dialect reads from the row's properties (`propertyValue`, given the bound name).
 */
export function groupSql(
  by: BreakdownBy,
  bind: (v: string) => string,
  propertyValue: (name: string) => string,
): string {
  if (typeof by === 'object') return `COALESCE(${propertyValue(bind(by.property))}, '')`;
  if (by === 'key_id' || by === 'provider') return by;
  return `COALESCE(${by}, '${NO_MODEL_GROUP}')`;
}

/**
 * Each row encoded for a store's INSERT; a row whose encoding fails on its own (`isRowError`) is counted as
 * rejected and the rest kept, any other failure thrown.
 */
export function encodeEach<V>(
  rows: readonly RequestLogRow[],
  encode: (r: RequestLogRow) => V,
  isRowError: (err: unknown) => boolean,
): { encoded: V[]; rejected: number } {
  const encoded: V[] = [];
  let rejected = 0;
  for (const r of rows) {
    try {
      encoded.push(encode(r));
    } catch (err) {
      if (!isRowError(err)) throw err;
      rejected++;
    }
  }
  return { encoded, rejected };
}

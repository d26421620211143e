/**
 * The daily usage rollup both log stores keep beside the request rows (table usage_daily): for each UTC day,
 * organization and account, the sums a usage series, breakdown or split shows and a histogram of latencies,
 * once per dimension a row is counted under:
 *   - per key (`total`), and per key and model, provider or credential fingerprint: the usage page's charts,
 *     which a key filter narrows;
 *   - per end user, session and custom property value, all keys together: those run to thousands a day, and
 *     a copy per key would make the rollup as large as the log.
 * A month's view then reads a few thousand rollup rows instead of a million requests.
 *
 * The rollup holds every row of the days from `covered_day` on (usage_daily_state): a row is added in the
 * transaction that inserts it (PostgreSQL: a statement trigger, so any writer's rows count), from that day on.
 * Days before it are read from the rows until a background fill (LogStore.fillUsageRollup) adds them one at a
 * time, newest first, lowering covered_day in the same transaction; retention raises it past the day it cuts
 * into and drops the rollup's days before. A range's whole covered days come from the rollup, the rest (the
 * partial days at its edges, uncovered days) from the rows, merged.
 *
 * Sums are exact. Percentiles from the rollup come from the histogram: each latency is taken as its bucket's
 * middle, within 2 % of the exact value; a range with fewer than ROLLUP_MIN_ROWS rows is read from the rows,
 * with exact percentiles, as it costs little.
 */
import { domainError } from '../errors.js';
import { LATENCY_BUCKET_SQL } from './latency-histogram.js';
import { AGGREGATE_SQL } from './log-query.js';
import type { BreakdownBy, RequestFilter, SplitBy } from './types.js';

const DAY_MS = 86_400_000;

/**
 * Below this many rows in a range, series and breakdowns are computed from the rows, with exact
 * percentiles: reading that many costs a few tens of milliseconds on either store.
 */
export const ROLLUP_MIN_ROWS = 20_000;

/** covered_day when the rollup holds every row (a log created with it, or fully filled). */
export const ROLLUP_COVERS_ALL = '1970-01-01';

/** The rollup's sums, named as AGGREGATE_SQL names them. */
export const ROLLUP_SUMS = [
  'requests',
  'errors',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cost_usd',
  'unknown_cost_requests',
  'partial_cost_requests',
] as const;

/** The rollup's key, in its primary key's order: an organization's dimension is a range of days. */
export const ROLLUP_KEY = ['org_id', 'dim', 'day', 'account_id', 'key_id', 'value'] as const;

/** Each dimension a row is counted under, with its value; keyed ones keep the key, the rest have key_id ''. */
const KEYED_DIMS: Record<string, string> = {
  total: "''",
  model: "COALESCE(model, '')",
  provider: 'provider',
  credential_fingerprint: "COALESCE(credential_fingerprint, '')",
};
const SHARED_DIMS: Record<string, string> = {
  end_user: "COALESCE(end_user, '')",
  session: "COALESCE(session, '')",
};
/** A custom property's dimension: its name after this prefix. */
export const PROPERTY_DIM = 'p:';

export interface RollupDialect {
  /** A request's UTC day, 'YYYY-MM-DD', from its created_at. */
  day: string;
  /** A FROM item of a source row's properties as (key, value) text, the row being `src`. */
  properties: string;
  /** An aggregate joining texts with commas. */
  concat: (expr: string) => string;
  /** Two histogram texts merged (ON CONFLICT's update). */
  merge: (a: string, b: string) => string;
}

/**
 * The statement that adds the rows of `source` matching `where` to the rollup: each row under each of its
 * dimensions, grouped first by rollup row and latency bucket, then by rollup row with its histogram. In key
 * order, so two writers adding to the same rollup rows lock them in the same order and never deadlock.
 */
export function rollupAddSql(d: RollupDialect, source: string, where: string): string {
  const measures =
    'lb, status, outcome, input_tokens, output_tokens, cache_read_tokens, cost_usd, price_source';
  const branch = (dim: string, keyId: string, value: string, from = 'src') =>
    `SELECT org_id, account_id, day, '${dim}' AS dim, ${keyId} AS key_id, ${value} AS value, ${measures} FROM ${from}`;
  const branches = [
    ...Object.entries(KEYED_DIMS).map(([dim, value]) => branch(dim, 'key_id', value)),
    ...Object.entries(SHARED_DIMS).map(([dim, value]) => branch(dim, "''", value)),
    `SELECT src.org_id, src.account_id, src.day, '${PROPERTY_DIM}' || p.key AS dim, '' AS key_id,
       COALESCE(CAST(p.value AS TEXT), '') AS value, ${measures
         .split(', ')
         .map((c) => `src.${c}`)
         .join(', ')}
     FROM src, ${d.properties} AS p`,
  ];
  const key = ROLLUP_KEY.join(', ');
  return `WITH src AS MATERIALIZED (
      SELECT COALESCE(org_id, '') AS org_id, account_id, key_id, ${d.day} AS day, ${LATENCY_BUCKET_SQL} AS lb,
        model, provider, credential_fingerprint, end_user, session, properties, status, outcome,
        input_tokens, output_tokens, cache_read_tokens, cost_usd, price_source
      FROM ${source} WHERE ${where}
    ), exploded AS (${branches.join('\n UNION ALL ')}
    ), by_bucket AS (
      SELECT ${key}, lb, ${AGGREGATE_SQL} FROM exploded GROUP BY ${key}, lb
    )
    INSERT INTO usage_daily (${key}, ${ROLLUP_SUMS.join(', ')}, latency)
    SELECT ${key}, ${ROLLUP_SUMS.map((c) => `SUM(${c})`).join(', ')}, ${d.concat("lb || ':' || requests")}
    FROM by_bucket WHERE true GROUP BY ${key} ORDER BY ${key}
    ON CONFLICT (${key}) DO UPDATE SET
      ${ROLLUP_SUMS.map((c) => `${c} = usage_daily.${c} + excluded.${c}`).join(', ')},
      latency = ${d.merge('usage_daily.latency', 'excluded.latency')}`;
}

/**
 * The rollup's tables, the same on both stores but for how each spells types: `tableSuffix` ends the
 * rollup's CREATE TABLE, `stateSuffix` its state's.
 */
export function rollupTableSql(t: {
  text: string;
  int: string;
  real: string;
  tableSuffix: string;
  stateSuffix: string;
}): string {
  return `
    CREATE TABLE usage_daily (
      ${ROLLUP_KEY.map((c) => `${c} ${t.text} NOT NULL`).join(',\n      ')},
      ${ROLLUP_SUMS.map((c) => `${c} ${c === 'cost_usd' ? t.real : t.int} NOT NULL`).join(',\n      ')},
      latency ${t.text} NOT NULL,
      PRIMARY KEY (${ROLLUP_KEY.join(', ')})
    )${t.tableSuffix};
    CREATE INDEX usage_daily_account ON usage_daily (account_id, dim, day);
    CREATE TABLE usage_daily_state (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      covered_day ${t.text} NOT NULL
    )${t.stateSuffix};`;
}

export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * covered_day for a log that already holds rows when the rollup is created: the day after the newest row's
 * and after today, so that no row written before the rollup existed is taken as counted.
 */
export function initialCoveredDay(newestCreatedAt: string | null, now = Date.now()): string {
  if (newestCreatedAt === null) return ROLLUP_COVERS_ALL;
  const newest = Math.max(Date.parse(newestCreatedAt), now);
  return dayOf(Math.floor(newest / DAY_MS) * DAY_MS + DAY_MS);
}

/** Retention's cut: covered_day at least the day after the one `before` falls in (that day loses rows). */
export function coveredAfterPrune(before: string): string {
  return dayOf(Math.ceil(parseTime(before) / DAY_MS) * DAY_MS);
}

function parseTime(value: string): number {
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw domainError('invalid_time', `Not an ISO-8601 time: ${value}`);
  return t;
}

/** What a read asks of the rollup: one dimension, grouped by day, key or value, maybe one value of it. */
export interface RollupPlan {
  dim: string;
  /** The rollup column the result is grouped by. */
  group: 'day' | 'key_id' | 'value';
  /** Only this value of the dimension (one end user's series). */
  value?: string;
  /** A property's breakdown: its '' group (rows without the property) is the total less the values. */
  property?: boolean;
}

type Grouping = { kind: 'series' } | { kind: 'breakdown'; by: BreakdownBy } | { kind: 'split'; by: SplitBy };

const SCOPE_AND_RANGE = new Set(['org_id', 'account_id', 'from', 'to']);

/**
 * The rollup read that answers a filter and grouping, or null when the rollup does not hold what it needs
 * (a filter on a column it does not keep, a key filter on a dimension kept across keys): then the rows do.
 */
export function planRollup(f: RequestFilter, g: Grouping): RollupPlan | null {
  let keyFiltered = false;
  let only: { dim: string; value: string } | undefined;
  for (const [k, v] of Object.entries(f) as [keyof RequestFilter, unknown][]) {
    if (v === undefined || SCOPE_AND_RANGE.has(k)) continue;
    if (k === 'key_id' && v !== '') keyFiltered = true;
    else if (k === 'exclude_key_ids') keyFiltered ||= (v as readonly string[]).length > 0;
    // The rollup keeps a missing value as '', which a filter on '' must not match.
    else if ((k === 'end_user' || k === 'session') && v !== '' && !only)
      only = { dim: k, value: v as string };
    else if (k === 'property' && !only) {
      const p = v as { name: string; value?: string };
      if (p.value === undefined || p.value === '') return null;
      only = { dim: PROPERTY_DIM + p.name, value: p.value };
    } else return null;
  }
  if (g.kind === 'series') {
    const dim = only?.dim ?? 'total';
    if (keyFiltered && dim !== 'total') return null;
    return { dim, group: 'day', ...(only && { value: only.value }) };
  }
  if (only) return null;
  const by = g.by;
  if (typeof by === 'object')
    return keyFiltered ? null : { dim: PROPERTY_DIM + by.property, group: 'value', property: true };
  if (by === 'key_id') return { dim: 'total', group: 'key_id' };
  if (by in KEYED_DIMS) return { dim: by, group: 'value' };
  return keyFiltered ? null : { dim: by, group: 'value' };
}

export interface RollupDays {
  /** The whole covered days the rollup answers, 'YYYY-MM-DD', [from, to); either open. */
  from?: string;
  to?: string;
  /** The rest of the range, as filters on the rows. */
  edges: RequestFilter[];
}

/** The filter's range cut at whole covered days; null when it holds none (the rows answer it all). */
export function rollupDays(f: RequestFilter, coveredDay: string): RollupDays | null {
  const covered = Date.parse(`${coveredDay}T00:00:00.000Z`);
  const from = f.from === undefined ? undefined : parseTime(f.from);
  const to = f.to === undefined ? undefined : parseTime(f.to);
  const dayFrom = Math.max(from === undefined ? covered : Math.ceil(from / DAY_MS) * DAY_MS, covered);
  const dayTo = to === undefined ? undefined : Math.floor(to / DAY_MS) * DAY_MS;
  if (dayTo !== undefined && dayFrom >= dayTo) return null;
  const iso = (t: number) => new Date(t).toISOString();
  const edges: RequestFilter[] = [];
  const coversAll = coveredDay === ROLLUP_COVERS_ALL;
  if (from === undefined ? !coversAll : from < dayFrom) edges.push({ ...f, to: iso(dayFrom) });
  if (to !== undefined && dayTo! < to) edges.push({ ...f, from: iso(dayTo!) });
  return {
    ...(!(coversAll && from === undefined) && { from: dayOf(dayFrom) }),
    ...(dayTo !== undefined && { to: dayOf(dayTo) }),
    edges,
  };
}

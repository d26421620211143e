/**
 * The hourly usage rollup both log stores keep beside the rows (table usage_hourly, log migration 19): one
 * row per organization, account, key, provider, model, credential fingerprint and UTC hour, with the sums a
 * usage series or breakdown shows and a histogram of latencies. Kept in the transaction that inserts rows
 * (only rows newly inserted count), pruned by whole hours with the rows. A month's series or breakdown then
 * reads the month's rollup rows instead of its requests: the whole hours of the range from the rollup, the
 * partial hours at its edges from the rows, merged.
 */
import { domainError } from '../errors.js';
import type { AggregateRow } from './log-query.js';
import type { RequestFilter, UsagePoint } from './types.js';

export const HOUR_MS = 3_600_000;

/**
 * Below this many rows in a range, series and breakdowns are computed from the rows, with exact
 * percentiles: reading that many rows takes a few tens of milliseconds on either store, so the rollup's
 * approximate percentiles are only paid where the rows would be slow.
 */
export const ROLLUP_MIN_ROWS = 20_000;

/**
 * Latency histogram buckets are 2 % wide on a log scale: a bucket's value (its geometric middle) is within
 * 1 % of any latency in it, and a histogram of one rollup row holds a few dozen buckets at most in practice.
 */
const LN_STEP = Math.log(1.02);
/** The bucket of a latency of 0 (or less): below any bucket a positive double falls in (ln(5e-324) / LN_STEP ≈ -37,600). */
export const ZERO_LATENCY_BUCKET = -100_000;

/** The SQL of a row's latency bucket, the same as latencyBucket on PostgreSQL (ln, floor). */
export const PG_LATENCY_BUCKET_SQL = `CASE WHEN latency_ms > 0 THEN floor(ln(latency_ms) / ln(1.02))::integer
  ELSE ${ZERO_LATENCY_BUCKET} END`;

export function latencyBucket(ms: number): number {
  return ms > 0 ? Math.floor(Math.log(ms) / LN_STEP) : ZERO_LATENCY_BUCKET;
}

function bucketValue(b: number): number {
  return b === ZERO_LATENCY_BUCKET ? 0 : Math.exp((b + 0.5) * LN_STEP);
}

/** Bucket → count. Stored as text, `bucket:count` pairs joined by commas (several may name one bucket). */
export type Histogram = Map<number, number>;

/**
 * Adds a histogram's text to `h`. Read character by character: a month's read merges ~5 bytes of it per
 * rollup row, and split/slice/Number cost twice as much.
 */
export function addHistogramText(h: Histogram, text: string | null | undefined): void {
  if (!text) return;
  let bucket = 0;
  let n = 0;
  let sign = 1;
  let inCount = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 44;
    if (c === 44 /* , */) {
      const b = sign * bucket;
      h.set(b, (h.get(b) ?? 0) + n);
      bucket = 0;
      n = 0;
      sign = 1;
      inCount = false;
    } else if (c === 58 /* : */) inCount = true;
    else if (c === 45 /* - */) sign = -1;
    else if (inCount) n = n * 10 + (c - 48);
    else bucket = bucket * 10 + (c - 48);
  }
}

export function histogramText(h: Histogram): string {
  return [...h.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([b, n]) => `${b}:${n}`)
    .join(',');
}

/**
 * percentile_cont over the histogram, each latency taken as its bucket's value: within 1 % of the exact
 * percentile (the two ranks it interpolates between are each within 1 % of theirs).
 */
export function histogramPercentile(h: Histogram, p: number): number | null {
  const buckets = [...h.entries()].filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]);
  const total = buckets.reduce((s, [, n]) => s + n, 0);
  if (total === 0) return null;
  const pos = p * (total - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const at = (rank: number): number => {
    let seen = 0;
    for (const [b, n] of buckets) {
      seen += n;
      if (rank < seen) return bucketValue(b);
    }
    return bucketValue(buckets[buckets.length - 1]![0]);
  };
  const a = at(lo);
  return lo === hi ? a : a + (at(hi) - a) * (pos - lo);
}

/** The rollup's dimensions, in its primary key's order after (org_id, hour). Null model and credential are ''. */
export const ROLLUP_DIMS = [
  'org_id',
  'account_id',
  'key_id',
  'provider',
  'model',
  'credential_fingerprint',
] as const;

/** The sums a rollup row holds, named as AGGREGATE_SQL names them (cost in USD, a float sum). */
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

/** The filters the rollup answers: each on a dimension it holds, or the time range. */
const ROLLUP_FILTERS = new Set<string>([
  'org_id',
  'account_id',
  'key_id',
  'exclude_key_ids',
  'provider',
  'model',
  'model_contains',
  'credential_fingerprint',
  'from',
  'to',
]);

/**
 * Whether the rollup can answer the filter: only the fields it holds, none of them '' (the rollup stores a
 * null model or credential as '', which a filter on '' must not match).
 */
export function rollupAnswers(f: RequestFilter): boolean {
  for (const [k, v] of Object.entries(f)) {
    if (v === undefined) continue;
    if (!ROLLUP_FILTERS.has(k) || v === '') return false;
  }
  return true;
}

export interface RollupRange {
  /** The whole hours the rollup answers: [from, to), either open. */
  from?: string;
  to?: string;
  /** The partial hours at the edges, as filters on the rows. */
  edges: RequestFilter[];
}

function parseTime(value: string): number {
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw domainError('invalid_time', `Not an ISO-8601 time: ${value}`);
  return t;
}

/** The filter's range cut at whole hours; null when it holds no whole hour (the rows answer it all). */
export function rollupRange(f: RequestFilter): RollupRange | null {
  const from = f.from === undefined ? undefined : parseTime(f.from);
  const to = f.to === undefined ? undefined : parseTime(f.to);
  const hFrom = from === undefined ? undefined : Math.ceil(from / HOUR_MS) * HOUR_MS;
  const hTo = to === undefined ? undefined : Math.floor(to / HOUR_MS) * HOUR_MS;
  if (hFrom !== undefined && hTo !== undefined && hFrom >= hTo) return null;
  const iso = (t: number) => new Date(t).toISOString();
  const edges: RequestFilter[] = [];
  if (from !== undefined && from < hFrom!) edges.push({ ...f, from: iso(from), to: iso(hFrom!) });
  if (to !== undefined && hTo! < to) edges.push({ ...f, from: iso(hTo!), to: iso(to) });
  return {
    ...(hFrom !== undefined && { from: iso(hFrom) }),
    ...(hTo !== undefined && { to: iso(hTo) }),
    edges,
  };
}

/** The WHERE of a rollup read: the filter's dimensions and the range's whole hours. */
export function rollupWhere(f: RequestFilter, range: RollupRange, bind: (v: string) => string): string {
  const parts: string[] = [];
  const eq = (column: string, value: string | undefined) => {
    if (value !== undefined) parts.push(`${column} = ${bind(value)}`);
  };
  eq('org_id', f.org_id);
  eq('account_id', f.account_id);
  if (parts.length === 0) throw new Error('a request read must be scoped to an organization or an account');
  eq('key_id', f.key_id);
  if (f.exclude_key_ids?.length)
    parts.push(`key_id NOT IN (${f.exclude_key_ids.map((id) => bind(id)).join(', ')})`);
  eq('provider', f.provider);
  eq('model', f.model);
  if (f.model_contains !== undefined) {
    const pattern = `%${f.model_contains.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    parts.push(`LOWER(model) LIKE ${bind(pattern)} ESCAPE '\\'`);
  }
  eq('credential_fingerprint', f.credential_fingerprint);
  if (range.from !== undefined) parts.push(`hour >= ${bind(range.from)}`);
  if (range.to !== undefined) parts.push(`hour < ${bind(range.to)}`);
  return parts.join(' AND ');
}

/** The select list of a rollup read: the sums (named as AGGREGATE_SQL's) and the histograms, concatenated. */
export function rollupSelectSql(concat: (column: string) => string): string {
  return `${ROLLUP_SUMS.map((c) => `SUM(${c}) AS ${c}`).join(', ')}, ${concat('latency')} AS latencies`;
}

type Sums = Record<(typeof ROLLUP_SUMS)[number], number>;

const zero = (): Sums => ({
  requests: 0,
  errors: 0,
  input_tokens: 0,
  output_tokens: 0,
  cache_read_tokens: 0,
  cost_usd: 0,
  unknown_cost_requests: 0,
  partial_cost_requests: 0,
});

/** Groups' sums and latencies from the rollup and from the edge rows, merged by group key. */
export class UsageMerge {
  private readonly groups = new Map<string, { sums: Sums; hist: Histogram }>();
  total = 0;

  private group(key: string) {
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { sums: zero(), hist: new Map() }));
    return g;
  }

  private addSums(sums: Sums, r: AggregateRow) {
    for (const c of ROLLUP_SUMS) sums[c] += Number(r[c] ?? 0);
    this.total += Number(r.requests);
  }

  /** A rollup group: its sums and its rows' histogram texts (rollupSelectSql's latencies). */
  addRollup(key: string, r: AggregateRow & { latencies?: string | null }): void {
    const g = this.group(key);
    this.addSums(g.sums, r);
    addHistogramText(g.hist, r.latencies);
  }

  /** A group of rows: its sums and its latencies. */
  addRows(key: string, r: AggregateRow, latencies: Iterable<number> = []): void {
    const g = this.group(key);
    this.addSums(g.sums, r);
    for (const ms of latencies) {
      const b = latencyBucket(ms);
      g.hist.set(b, (g.hist.get(b) ?? 0) + 1);
    }
  }

  results(): Array<{ key: string; numbers: Omit<UsagePoint, 'bucket'> }> {
    return [...this.groups].map(([key, { sums, hist }]) => ({
      key,
      numbers: {
        ...sums,
        latency_p50_ms: histogramPercentile(hist, 0.5),
        latency_p95_ms: histogramPercentile(hist, 0.95),
      },
    }));
  }
}

/** One request row's share of the rollup, as the stores read it from a row being written. */
export interface RollupInput {
  org_id: string | null;
  account_id: string;
  key_id: string;
  provider: string;
  model: string | null;
  credential_fingerprint: string | null;
  created_at: string;
  status: number;
  outcome: string;
  input_tokens: number | null;
  output_tokens: number | null;
  cache_read_tokens: number | null;
  cost_usd: number | null;
  price_source: string | null;
  latency_ms: number;
}

/** A rollup row's increment: its key, its sums and its histogram. */
export interface RollupDelta {
  dims: string[];
  hour: string;
  sums: Sums;
  hist: Histogram;
}

/** LIKE 'x%' as SQLite reads it (ASCII letters in any case), which AGGREGATE_SQL's counts use there. */
function startsLike(value: string | null, prefix: string): boolean {
  return value !== null && value.slice(0, prefix.length).toLowerCase() === prefix;
}

/** Rows grouped into rollup increments, one per rollup row they touch (AGGREGATE_SQL's definitions). */
export function rollupDeltas(rows: Iterable<RollupInput>): RollupDelta[] {
  const out = new Map<string, RollupDelta>();
  for (const r of rows) {
    const dims = [
      r.org_id ?? '',
      r.account_id,
      r.key_id,
      r.provider,
      r.model ?? '',
      r.credential_fingerprint ?? '',
    ];
    const hour = `${r.created_at.slice(0, 13)}:00:00.000Z`;
    const key = `${dims.join('\u0000')}\u0000${hour}`;
    let d = out.get(key);
    if (!d) out.set(key, (d = { dims, hour, sums: zero(), hist: new Map() }));
    const s = d.sums;
    s.requests++;
    if (r.status >= 400 || r.outcome !== 'ok') s.errors++;
    s.input_tokens += r.input_tokens ?? 0;
    s.output_tokens += r.output_tokens ?? 0;
    s.cache_read_tokens += r.cache_read_tokens ?? 0;
    if (r.cost_usd === null) {
      if (!startsLike(r.price_source, 'not billed')) s.unknown_cost_requests++;
    } else s.cost_usd += r.cost_usd;
    if (startsLike(r.price_source, 'partial:')) s.partial_cost_requests++;
    const b = latencyBucket(r.latency_ms);
    d.hist.set(b, (d.hist.get(b) ?? 0) + 1);
  }
  // In key order: two writers touching the same rollup rows take them in the same order.
  return [...out.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, d]) => d);
}

/** The columns a breakdown or a split series can group the rollup by. */
export const ROLLUP_GROUPS: ReadonlySet<string> = new Set([
  'model',
  'key_id',
  'provider',
  'credential_fingerprint',
]);

/** Retention's cut on the hour: rows and rollup hours before the hour `before` falls in go together. */
export function rollupPruneBefore(before: string): string {
  return new Date(Math.floor(parseTime(before) / HOUR_MS) * HOUR_MS).toISOString();
}

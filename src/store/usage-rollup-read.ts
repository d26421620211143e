/**
 * The daily usage rollup's reads, shared by both log stores (usage-rollup.ts holds what the rollup is): a
 * range's whole covered days from the rollup, the rest from the rows, merged; a page of top groups ranked in
 * the database.
 */
import { addHistogramText, histogramPercentiles, type Histogram } from './latency-histogram.js';
import { AGGREGATE_SQL, buildWhere, RANK_VALUE, type AggregateRow, type WhereDialect } from './log-query.js';
import type {
  BreakdownBy,
  BreakdownRank,
  RequestFilter,
  SplitBy,
  UsageBreakdownRow,
  UsagePoint,
  UsageSplitPoint,
} from './types.js';
import { planRollup, rollupDays, ROLLUP_SUMS, type RollupDays, type RollupPlan } from './usage-rollup.js';

/** A rollup group as a read returns it: its key, sums and histogram texts (or a split's group). */
export type RollupReadRow = AggregateRow & {
  k: string;
  g?: string | null;
  latencies?: string | null;
  total_groups?: number | string;
};

/**
 * A rollup read: the plan's dimension over the days, in the filter's scope and key filters; grouped by the
 * plan's group, or for a split by day and by the column's value when it is one of `splitGroups`. Each value
 * is bound by `bind` in the order it appears.
 */
export function rollupReadSql(
  plan: RollupPlan,
  days: RollupDays,
  f: RequestFilter,
  bind: (v: string) => string,
  concat: (expr: string) => string,
  splitGroups?: readonly string[],
  histograms: { only?: readonly string[] } | false = {},
): string {
  const sums = ROLLUP_SUMS.map((c) => `SUM(${c}) AS ${c}`).join(', ');
  let select: string;
  let groupBy: string;
  if (splitGroups) {
    const col = plan.group === 'key_id' ? 'key_id' : 'value';
    const g =
      splitGroups.length === 0
        ? 'NULL'
        : `CASE WHEN ${col} IN (${splitGroups.map(bind).join(', ')}) THEN ${col} END`;
    select = `day AS k, ${g} AS g, ${sums}`;
    groupBy = '1, 2';
  } else {
    select = `${plan.group} AS k, ${sums}${histograms ? `, ${concat('latency')} AS latencies` : ''}`;
    groupBy = '1';
  }
  const parts: string[] = [];
  if (f.org_id !== undefined) parts.push(`org_id = ${bind(f.org_id)}`);
  if (f.account_id !== undefined) parts.push(`account_id = ${bind(f.account_id)}`);
  if (parts.length === 0) throw new Error('a request read must be scoped to an organization or an account');
  parts.push(`dim = ${bind(plan.dim)}`);
  if (days.from !== undefined) parts.push(`day >= ${bind(days.from)}`);
  if (days.to !== undefined) parts.push(`day < ${bind(days.to)}`);
  if (f.key_id !== undefined) parts.push(`key_id = ${bind(f.key_id)}`);
  if (f.exclude_key_ids?.length) parts.push(`key_id NOT IN (${f.exclude_key_ids.map(bind).join(', ')})`);
  if (plan.value !== undefined) parts.push(`value = ${bind(plan.value)}`);
  if (histograms && histograms.only) parts.push(`${plan.group} IN (${histograms.only.map(bind).join(', ')})`);
  return `SELECT ${select} FROM usage_daily WHERE ${parts.join(' AND ')} GROUP BY ${groupBy}`;
}

/** Each rank's value of a group, in SQL over the ranked read's sums (RANK_VALUE's). */
const RANK_SQL: Record<BreakdownRank, string> = {
  requests: 'SUM(requests)',
  cost: 'SUM(cost_usd)',
  tokens: 'SUM(input_tokens) + SUM(output_tokens)',
};

/**
 * The first `top.limit` groups by `top.rank`, summed and ranked in one statement over the rollup's days and
 * the rows at the edges, each row with how many groups there are. In UsageMerge's order: rank, then
 * requests, then the group's text (RollupBackend.binary).
 */
export function rankedReadSql(
  plan: RollupPlan,
  days: RollupDays,
  f: RequestFilter,
  by: BreakdownBy,
  top: UsageTop,
  d: WhereDialect,
  binary: (expr: string) => string,
  groupKey: RollupBackend['groupSql'],
): string {
  const parts = [
    rollupReadSql(
      plan,
      days,
      f,
      (v) => d.bind(v),
      () => '',
      undefined,
      false,
    ),
  ];
  // Placeholders are positional: each part's are bound in text order.
  for (const edge of days.edges) {
    const key = groupKey(by, (v) => d.bind(v));
    parts.push(`SELECT ${key} AS k, ${AGGREGATE_SQL} FROM requests WHERE ${buildWhere(edge, d)} GROUP BY 1`);
  }
  const sums = ROLLUP_SUMS.map((c) => `SUM(${c}) AS ${c}`).join(', ');
  const rank = top.rank === 'requests' ? '' : `${RANK_SQL[top.rank]} DESC, `;
  return `SELECT k, ${sums}, COUNT(*) OVER () AS total_groups
    FROM (${parts.join(' UNION ALL ')}) AS parts
    GROUP BY k HAVING SUM(requests) > 0
    ORDER BY ${rank}SUM(requests) DESC, ${binary('k')}
    LIMIT ${d.bind(top.limit)}`;
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

/** A group's numbers, keyed by its bucket or its value. */
export interface UsageGroup {
  key: string;
  numbers: Omit<UsagePoint, 'bucket'>;
}

/** The first `limit` groups by `rank` (LogStore.usageTop). */
export interface UsageTop {
  rank: BreakdownRank;
  limit: number;
}

/**
 * Groups' sums and histograms from the rollup and from the rows at the edges, merged by group key. A
 * rollup group's histogram texts are kept as read and parsed only for the groups returned: a month by
 * session has tens of thousands of groups, of which a page shows 500.
 */
export class UsageMerge {
  private readonly groups = new Map<
    string,
    { sums: Sums; hist: Histogram; texts: Array<string | null | undefined>; signs: number[] }
  >();

  private group(key: string) {
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { sums: zero(), hist: new Map(), texts: [], signs: [] }));
    return g;
  }

  /** A rollup group, or (sign -1) one taken away: its sums and its histogram texts. */
  addRollup(key: string, r: RollupReadRow, sign = 1): void {
    const g = this.group(key);
    for (const c of ROLLUP_SUMS) g.sums[c] += sign * Number(r[c] ?? 0);
    g.texts.push(r.latencies);
    g.signs.push(sign);
  }

  /** Rows of one group and latency bucket. */
  addBucket(key: string, lb: number, r: AggregateRow): void {
    const g = this.group(key);
    for (const c of ROLLUP_SUMS) g.sums[c] += Number(r[c] ?? 0);
    g.hist.set(lb, (g.hist.get(lb) ?? 0) + Number(r.requests));
  }

  /** Rows of one group and latency bucket whose sums are counted already: their latencies alone. */
  addLatencies(key: string, lb: number, r: Pick<AggregateRow, 'requests'>): void {
    const g = this.group(key);
    g.hist.set(lb, (g.hist.get(lb) ?? 0) + Number(r.requests));
  }

  /** A group's histogram texts, read after its sums. */
  addTexts(key: string, text: string | null | undefined): void {
    const g = this.group(key);
    g.texts.push(text);
    g.signs.push(1);
  }

  /** The groups that hold a row; with `top`, the first `limit` by `rank` (ties in sortBreakdown's order). */
  private ordered(top?: UsageTop) {
    const entries = [...this.groups].filter(([, g]) => g.sums.requests > 0);
    if (!top) return { entries, total: entries.length };
    entries.sort(([ka, a], [kb, b]) => b.sums.requests - a.sums.requests || (ka < kb ? -1 : ka > kb ? 1 : 0));
    const value = RANK_VALUE[top.rank];
    if (top.rank !== 'requests') entries.sort(([, a], [, b]) => value(b.sums) - value(a.sums));
    return { entries: entries.slice(0, top.limit), total: entries.length };
  }

  /** Each group that holds a row (with `top`, the first by rank, in that order), and how many there are. */
  results(top?: UsageTop): { groups: UsageGroup[]; total: number } {
    const { entries, total } = this.ordered(top);
    const groups = entries.map(([key, { sums, hist, texts, signs }]) => {
      texts.forEach((t, i) => addHistogramText(hist, t, signs[i]));
      const [p50, p95] = histogramPercentiles(hist, [0.5, 0.95]);
      return { key, numbers: { ...sums, latency_p50_ms: p50 ?? null, latency_p95_ms: p95 ?? null } };
    });
    return { groups, total };
  }
}

/** What a store gives the rollup reads: its queries, as each store runs them. */
export interface RollupBackend {
  /** The first day the rollup holds in full. */
  coveredDay(): Promise<string>;
  /** A read of the rollup (and, ranked, of the rows): its statement, each value bound through `d`. */
  readRollup(build: (d: WhereDialect) => string): Promise<RollupReadRow[]>;
  concat: (expr: string) => string;
  /**
   * An ORDER BY term comparing text by code point (UTF-8's bytes): JS's order of group keys, but for astral
   * characters against U+E000–U+FFFF.
   */
  binary: (expr: string) => string;
  /** A breakdown's group of a row, as the rollup keeps it (log-query.ts groupSql, in this store's SQL). */
  groupSql: (by: BreakdownBy, bind: (v: string) => string) => string;
  /** The rows' groups by latency bucket: by day for a series, else by the breakdown's column; `only` those. */
  rowsByBucket(
    f: RequestFilter,
    by: BreakdownBy | 'day',
    only?: readonly string[],
  ): Promise<Array<AggregateRow & { k: string; lb: number }>>;
  /** The rows' split series (LogStore.usageSeriesSplit, by day). */
  rowsSplit(f: RequestFilter, by: SplitBy, groups: readonly string[]): Promise<UsageSplitPoint[]>;
}

const dayBucket = (day: string) => `${day}T00:00:00.000Z`;

/**
 * A usage series by day or a breakdown from the rollup and the edge rows; null when the rollup cannot answer
 * it, or holds fewer than `minRows` rows of it (the rows answer then, with exact percentiles).
 */
export async function rollupUsage(
  b: RollupBackend,
  f: RequestFilter,
  by: BreakdownBy | 'day',
  minRows: number,
  top?: UsageTop,
): Promise<{ groups: UsageGroup[]; total: number } | null> {
  const plan = planRollup(f, by === 'day' ? { kind: 'series' } : { kind: 'breakdown', by });
  if (!plan) return null;
  const days = rollupDays(f, await b.coveredDay());
  if (!days) return null;
  if (top !== undefined && by !== 'day' && !plan.property)
    return rollupTop(b, plan, days, f, by, top, minRows);
  const merge = new UsageMerge();
  const rows = await b.readRollup((d) => rollupReadSql(plan, days, f, (v) => d.bind(v), b.concat));
  let total = 0;
  for (const r of rows) {
    merge.addRollup(plan.group === 'day' ? dayBucket(r.k) : r.k, r);
    if (plan.property) merge.addRollup('', r, -1);
    else total += Number(r.requests);
  }
  if (plan.property) {
    const all = await b.readRollup((d) =>
      rollupReadSql({ dim: 'total', group: 'day' }, days, f, (v) => d.bind(v), b.concat),
    );
    for (const r of all) {
      merge.addRollup('', r);
      total += Number(r.requests);
    }
  }
  if (total < minRows) return null;
  for (const edge of days.edges)
    for (const r of await b.rowsByBucket(edge, by)) merge.addBucket(String(r.k), Number(r.lb), r);
  return merge.results(top);
}

/**
 * A page of top groups: ranked in the database (rankedReadSql), then the histograms of that page's groups
 * alone, from the rollup and the edge rows. A month by session has tens of thousands of groups, of which a
 * page shows 500; handing them all over to be merged and ranked here cost more than the database's grouping.
 */
async function rollupTop(
  b: RollupBackend,
  plan: RollupPlan,
  days: RollupDays,
  f: RequestFilter,
  by: BreakdownBy,
  top: UsageTop,
  minRows: number,
): Promise<{ groups: UsageGroup[]; total: number } | null> {
  // The rows' count decides, as for every rollup read: a small range is read from the rows, exactly.
  const totals = await b.readRollup((d) =>
    rollupReadSql({ dim: 'total', group: 'day' }, days, f, (v) => d.bind(v), b.concat, undefined, false),
  );
  if (totals.reduce((n, r) => n + Number(r.requests), 0) < minRows) return null;
  const ranked = await b.readRollup((d) => rankedReadSql(plan, days, f, by, top, d, b.binary, b.groupSql));
  const merge = new UsageMerge();
  for (const r of ranked) merge.addRollup(r.k, r);
  const only = ranked.map((r) => r.k);
  if (only.length > 0) {
    for (const r of await b.readRollup((d) =>
      rollupReadSql(plan, days, f, (v) => d.bind(v), b.concat, undefined, { only }),
    ))
      merge.addTexts(r.k, r.latencies);
    for (const edge of days.edges)
      for (const r of await b.rowsByBucket(edge, by, only)) merge.addLatencies(String(r.k), Number(r.lb), r);
  }
  return { groups: merge.results(top).groups, total: Number(ranked[0]?.total_groups ?? 0) };
}

/** A split series by day from the rollup and the edge rows; null when the rollup cannot answer it. */
export async function rollupSplit(
  b: RollupBackend,
  f: RequestFilter,
  by: SplitBy,
  groups: readonly string[],
): Promise<UsageSplitPoint[] | null> {
  const plan = planRollup(f, { kind: 'split', by });
  if (!plan) return null;
  const days = rollupDays(f, await b.coveredDay());
  if (!days) return null;
  const points = new Map<string, UsageSplitPoint>();
  const add = (p: UsageSplitPoint) => {
    const key = `${p.bucket}\u0000${p.group ?? '\u0001'}`;
    const had = points.get(key);
    if (!had) points.set(key, { ...p });
    else for (const c of ROLLUP_SUMS) had[c] += p[c];
  };
  for (const r of await b.readRollup((d) =>
    rollupReadSql(plan, days, f, (v) => d.bind(v), b.concat, groups),
  )) {
    const sums = zero();
    for (const c of ROLLUP_SUMS) sums[c] = Number(r[c] ?? 0);
    add({ bucket: dayBucket(r.k), group: r.g ?? null, ...sums });
  }
  for (const edge of days.edges) for (const p of await b.rowsSplit(edge, by, groups)) add(p);
  return [...points.values()].filter((p) => p.requests > 0);
}

/** Sorted as usageSeries and usageBreakdown return them. */
export function seriesPoints(
  groups: Array<{ key: string; numbers: Omit<UsagePoint, 'bucket'> }>,
): UsagePoint[] {
  return groups
    .map(({ key, numbers }) => ({ bucket: key, ...numbers }))
    .sort((a, b) => (a.bucket < b.bucket ? -1 : 1));
}

export function breakdownRows(groups: UsageGroup[]): UsageBreakdownRow[] {
  return groups.map(({ key, numbers }) => ({ group: key, ...numbers }));
}

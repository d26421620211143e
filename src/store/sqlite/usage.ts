/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/** Usage series and breakdowns on SQLite: from the hourly rollup where it answers (../rollup.ts), else the rows. */
import {
  AGGREGATE_SQL,
  buildWhere,
  groupSql,
  percentileCont,
  sortBreakdown,
  toUsageNumbers,
  type AggregateRow,
  type WhereDialect,
} from '../log-query.js';
import {
  ROLLUP_GROUPS,
  ROLLUP_MIN_ROWS,
  UsageMerge,
  rollupAnswers,
  rollupRange,
  rollupSelectSql,
  rollupWhere,
} from '../rollup.js';
import type { BreakdownBy, LogStore, RequestFilter, UsageBreakdownRow, UsagePoint } from '../types.js';
import type { StatementCache } from './db.js';

/** A property's value in a row (null when it has none), the name given as a placeholder. */
const PROPERTY_VALUE = (name: string) =>
  `(SELECT value FROM json_each(requests.properties) WHERE key = ${name})`;

export function sqliteUsageReads(
  stmt: StatementCache,
  dialect: (params: (string | number)[]) => WhereDialect,
  bucketSql: Record<'minute' | 'hour' | 'day', string>,
  rollupBucketSql: Record<'hour' | 'day', string>,
): Pick<LogStore, 'usageSeries' | 'usageBreakdown'> {
  async function usageSeries(f: RequestFilter, bucket: 'minute' | 'hour' | 'day'): Promise<UsagePoint[]> {
    const groups = usage(f, bucketSql[bucket], bucket === 'minute' ? null : rollupBucketSql[bucket]);
    return groups
      .map(({ key, numbers }) => ({ bucket: key, ...numbers }))
      .sort((a, b) => (a.bucket < b.bucket ? -1 : 1));
  }

  async function usageBreakdown(f: RequestFilter, by: BreakdownBy): Promise<UsageBreakdownRow[]> {
    return sortBreakdown(
      usage(
        f,
        (d) => groupSql(by, (v) => d.bind(v), PROPERTY_VALUE),
        typeof by === 'string' && ROLLUP_GROUPS.has(by) ? by : null,
      ).map(({ key, numbers }) => ({ group: key, ...numbers })),
    );
  }

  /**
   * A series' or breakdown's groups: from the hourly rollup where it holds the filter's fields and the
   * grouping (`rollupKey`, that grouping over usage_hourly), the range's partial edge hours from the rows;
   * from the rows alone otherwise, or where the range holds no more than ROLLUP_MIN_ROWS rows (exact
   * percentiles, cheaply).
   */
  function usage(
    f: RequestFilter,
    key: string | ((d: WhereDialect) => string),
    rollupKey: string | null,
  ): Array<{ key: string; numbers: Omit<UsagePoint, 'bucket'> }> {
    const range = rollupKey !== null && rollupAnswers(f) ? rollupRange(f) : null;
    if (range) {
      const merge = new UsageMerge();
      const params: string[] = [];
      const where = rollupWhere(f, range, (v) => (params.push(v), '?'));
      const rows = stmt<string[], AggregateRow & { k: string; latencies: string }>(
        `SELECT ${rollupKey} AS k, ${rollupSelectSql((c) => `group_concat(${c})`)}
         FROM usage_hourly WHERE ${where} GROUP BY k`,
      ).all(...params);
      for (const r of rows) merge.addRollup(r.k, r);
      if (merge.total > ROLLUP_MIN_ROWS) {
        for (const edge of range.edges)
          for (const g of aggregate(edge, key)) merge.addRows(g.key, g.sums, g.latencies);
        return merge.results();
      }
    }
    return aggregate(f, key).map(({ key: k, sums, latencies }) => ({
      key: k,
      numbers: toUsageNumbers(sums, percentileCont(latencies, 0.5), percentileCont(latencies, 0.95)),
    }));
  }

  /**
   * Sums in SQL; percentiles in JS over each group's latencies (SQLite has no percentile_cont), which the same
   * statement hands over as one text per group. 17 significant digits read back as the same double; a
   * REAL's own text does not everywhere (node:sqlite's SQLite 3.51 on Node 22 writes 1/3 with 15). Reading
   * the rows a second time for the latencies cost as much again: 2.3 → 1.3 s for a month by day over
   * 1,000,000 rows.
   */
  function aggregate(f: RequestFilter, key: string | ((d: WhereDialect) => string)) {
    const params: (string | number)[] = [];
    const d = dialect(params);
    // Placeholders are positional: the select list's come first.
    const keySql = typeof key === 'string' ? key : key(d);
    const where = buildWhere(f, d);
    const groups = stmt<unknown[], AggregateRow & { k: string; latencies: string }>(
      `SELECT ${keySql} AS k, ${AGGREGATE_SQL}, group_concat(printf('%!.17g', latency_ms)) AS latencies
       FROM requests WHERE ${where} GROUP BY k`,
    ).all(...params);
    return groups.map(({ latencies, k, ...sums }) => ({
      key: k,
      sums,
      latencies: Float64Array.from(latencies.split(','), Number).sort(),
    }));
  }

  return { usageSeries, usageBreakdown };
}

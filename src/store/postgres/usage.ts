/** Usage series and breakdowns on PostgreSQL: from the hourly rollup where it answers (../rollup.ts), else the rows. */
import type pg from 'pg';
import {
  AGGREGATE_SQL,
  buildWhere,
  groupSql,
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
import { isoOrNull } from './db.js';
import { dialect } from './log-dialect.js';

/** A property's value in a row (null when it has none), the name given as a placeholder. */
const PROPERTY_VALUE = (name: string) => `properties ->> (${name}::text)`;

export function pgUsageReads(pool: pg.Pool): Pick<LogStore, 'usageSeries' | 'usageBreakdown'> {
  async function usageSeries(f: RequestFilter, bucket: 'minute' | 'hour' | 'day'): Promise<UsagePoint[]> {
    const rows = await usage(
      f,
      `date_trunc('${bucket}', created_at, 'UTC')`,
      bucket === 'minute' ? null : bucket === 'hour' ? 'hour' : `date_trunc('day', hour, 'UTC')`,
      (k) => isoOrNull(k)!,
    );
    return rows
      .map((r) => ({ bucket: r.key, ...r.numbers }))
      .sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
  }

  async function usageBreakdown(f: RequestFilter, by: BreakdownBy): Promise<UsageBreakdownRow[]> {
    const rows = await usage(
      f,
      (d) => groupSql(by, (v) => d.bind(v), PROPERTY_VALUE),
      typeof by === 'string' && ROLLUP_GROUPS.has(by) ? by : null,
      String,
    );
    return sortBreakdown(rows.map((r) => ({ group: r.key, ...r.numbers })));
  }

  /**
   * A series' or breakdown's groups: from the hourly rollup where it holds the filter's fields and the
   * grouping (`rollupKey`, that grouping over usage_hourly), the range's partial edge hours from the rows;
   * from the rows alone otherwise, or where the range holds no more than ROLLUP_MIN_ROWS rows (exact
   * percentiles, cheaply). `keyOf` turns a group's key as the driver reads it into text.
   */
  async function usage(
    f: RequestFilter,
    key: string | ((d: WhereDialect) => string),
    rollupKey: string | null,
    keyOf: (k: unknown) => string,
  ): Promise<Array<{ key: string; numbers: Omit<UsagePoint, 'bucket'> }>> {
    const range = rollupKey !== null && rollupAnswers(f) ? rollupRange(f) : null;
    if (range) {
      const merge = new UsageMerge();
      const params: string[] = [];
      const where = rollupWhere(f, range, (v) => `$${params.push(v)}`);
      const { rows } = await pool.query<AggregateRow & { k: unknown; latencies: string }>(
        `SELECT ${rollupKey} AS k, ${rollupSelectSql((c) => `string_agg(${c}, ',')`)}
         FROM usage_hourly WHERE ${where} GROUP BY 1`,
        params,
      );
      for (const r of rows) merge.addRollup(keyOf(r.k), r);
      if (merge.total > ROLLUP_MIN_ROWS) {
        for (const edge of range.edges) {
          const edgeRows = await aggregate<{ latencies: number[] }>(
            edge,
            key,
            'array_agg(latency_ms) AS latencies',
          );
          for (const r of edgeRows) merge.addRows(keyOf(r.k), r, r.latencies);
        }
        return merge.results();
      }
    }
    const rows = await aggregate<{ p50: number | null; p95: number | null }>(
      f,
      key,
      `percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95`,
    );
    return rows.map((r) => ({ key: keyOf(r.k), numbers: toUsageNumbers(r, r.p50, r.p95) }));
  }

  /** Each group's sums over the rows, and `latency` (its latencies' percentiles, or the latencies). */
  async function aggregate<L extends object>(
    f: RequestFilter,
    key: string | ((d: WhereDialect) => string),
    latency: string,
  ) {
    const params: unknown[] = [];
    const d = dialect(params);
    const keySql = typeof key === 'string' ? key : key(d);
    const where = buildWhere(f, d);
    const { rows } = await pool.query<AggregateRow & { k: unknown } & L>(
      `SELECT ${keySql} AS k, ${AGGREGATE_SQL}, ${latency}
       FROM requests WHERE ${where} GROUP BY 1 ORDER BY 1`,
      params,
    );
    return rows;
  }

  return { usageSeries, usageBreakdown };
}

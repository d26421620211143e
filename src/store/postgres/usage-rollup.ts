/**
 * The daily usage rollup on PostgreSQL (../usage-rollup.ts): its tables and the statement trigger that adds
 * every inserted row to it, whichever instance (or version of keyrelay) wrote it; the background fill of the
 * days before it, retention's cut, and the reads.
 *
 * One advisory lock orders the three writers of covered_day's meaning: an insert's trigger holds it shared
 * until its transaction ends, the fill and the prune exclusively. So the fill's read of a day's rows sees
 * every row a trigger left out as not yet covered, and a trigger that runs after a fill sees the day
 * covered (each statement of a READ COMMITTED transaction reads what committed before it).
 */
import type pg from 'pg';
import {
  AGGREGATE_SQL,
  buildWhere,
  groupSql,
  idsBefore,
  idsFrom,
  sortBreakdown,
  topGroups,
  toUsageNumbers,
  type AggregateRow,
  type WhereDialect,
} from '../log-query.js';
import { LATENCY_BUCKET_SQL } from '../latency-histogram.js';
import {
  breakdownRows,
  rollupSplit,
  rollupUsage,
  seriesPoints,
  type RollupBackend,
  type RollupReadRow,
} from '../usage-rollup-read.js';
import {
  coveredAfterPrune,
  rollupAddSql,
  rollupTableSql,
  ROLLUP_COVERS_ALL,
  type RollupDialect,
} from '../usage-rollup.js';
import type { BreakdownBy, LogStore, RequestFilter } from '../types.js';
import { inTransaction, isoOrNull } from './db.js';
import { dialect } from './log-dialect.js';

// Arbitrary constant, apart from the migration's and the search index's locks.
const ROLLUP_LOCK = '7351842096423';

const DIALECT: RollupDialect = {
  day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  properties: 'jsonb_each_text(src.properties)',
  concat: (expr) => `string_agg(${expr}, ',')`,
  merge: (a, b) => `usage_latency_merge(${a}, ${b})`,
};

/**
 * Log migration 19: the tables, the histogram merge, the trigger, and covered_day: the day after the newest
 * row's and today (initialCoveredDay), or every day for an empty log.
 */
export function usageRollupMigrationSql(): string {
  return `
  ${rollupTableSql({
    text: 'text COLLATE "C"',
    int: 'bigint',
    real: 'double precision',
    // Each batch updates its day's rows in place: room on the page keeps the new version beside the old (a
    // HOT update, no index entry): a month of the views bench took 123 MB instead of 331.
    tableSuffix: ' WITH (fillfactor = 50)',
    stateSuffix: '',
  })}
  -- Two histograms' bucket:count pairs, summed by bucket, in bucket order.
  CREATE FUNCTION usage_latency_merge(a text, b text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg(concat(k, ':', n), ',' ORDER BY k) FROM (
      SELECT split_part(e, ':', 1)::integer AS k, sum(split_part(e, ':', 2)::bigint) AS n
      FROM unnest(string_to_array(a, ',') || string_to_array(b, ',')) AS e GROUP BY 1
    ) merged
  $$;
  CREATE FUNCTION usage_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_advisory_xact_lock_shared(${ROLLUP_LOCK});
    ${rollupAddSql(DIALECT, 'new_rows', `${DIALECT.day} >= (SELECT covered_day FROM usage_daily_state)`)};
    RETURN NULL;
  END
  $$;
  CREATE TRIGGER requests_usage_daily AFTER INSERT ON requests REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION usage_daily_add();
  INSERT INTO usage_daily_state (id, covered_day)
    SELECT 1, CASE WHEN newest IS NULL THEN '${ROLLUP_COVERS_ALL}'
      ELSE to_char(greatest(newest, now()) AT TIME ZONE 'UTC' + interval '1 day', 'YYYY-MM-DD') END
    FROM (SELECT (SELECT created_at FROM requests ORDER BY id DESC LIMIT 1) AS newest) n;`;
}

const ADD_RANGE_SQL = rollupAddSql(
  DIALECT,
  'requests',
  'id >= $1 AND id < $2 AND created_at >= $3 AND created_at < $4',
);

/** Runs fn in a transaction holding the rollup's lock exclusively. */
function exclusively<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [ROLLUP_LOCK]);
    return fn(client);
  });
}

/** The newest uncovered day added to the rollup and covered (../usage-rollup.ts); false when none is left. */
export function fillOneDay(pool: pg.Pool): Promise<boolean> {
  return exclusively(pool, async (client) => {
    const { rows } = await client.query<{ covered_day: string }>('SELECT covered_day FROM usage_daily_state');
    const coveredIso = `${rows[0]!.covered_day}T00:00:00.000Z`;
    const newest = await client.query<{ day: string }>(
      `SELECT ${DIALECT.day} AS day FROM requests WHERE id < $1 AND created_at < $2 ORDER BY id DESC LIMIT 1`,
      [idsBefore(coveredIso), coveredIso],
    );
    if (newest.rows.length === 0) return false;
    const day = newest.rows[0]!.day;
    const dayIso = `${day}T00:00:00.000Z`;
    await client.query(ADD_RANGE_SQL, [idsFrom(dayIso), idsBefore(coveredIso), dayIso, coveredIso]);
    await client.query('UPDATE usage_daily_state SET covered_day = $1', [day]);
    return true;
  });
}

/** Before retention deletes rows older than `before`: the day it cuts into and those before leave the rollup. */
export async function pruneRollup(pool: pg.Pool, before: string): Promise<void> {
  const day = coveredAfterPrune(before);
  await exclusively(pool, async (client) => {
    await client.query('UPDATE usage_daily_state SET covered_day = greatest(covered_day, $1)', [day]);
    await client.query('DELETE FROM usage_daily WHERE day < $1', [day]);
  });
}

/** A property's value in a row (null when it has none), the name given as a placeholder. */
const PROPERTY_VALUE = (name: string) => `properties ->> (${name}::text)`;

/**
 * Usage series, breakdowns and split series on PostgreSQL: from the rollup where it answers
 * (../usage-rollup.ts), else from the rows.
 */
export function pgUsageReads(
  pool: pg.Pool,
  split: LogStore['usageSeriesSplit'],
  minRows: number,
): Pick<LogStore, 'usageSeries' | 'usageBreakdown' | 'usageTop' | 'usageSeriesSplit'> {
  const rollup = pgRollupBackend(pool, split);
  async function aggregate(f: RequestFilter, key: string | ((d: WhereDialect) => string)) {
    const params: unknown[] = [];
    const d = dialect(params);
    const keySql = typeof key === 'string' ? key : key(d);
    const where = buildWhere(f, d);
    const { rows } = await pool.query<AggregateRow & { k: unknown; p50: number | null; p95: number | null }>(
      `SELECT ${keySql} AS k, ${AGGREGATE_SQL},
         percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50,
         percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95
       FROM requests WHERE ${where} GROUP BY 1 ORDER BY 1`,
      params,
    );
    return rows.map((r) => ({ k: r.k, numbers: toUsageNumbers(r, r.p50, r.p95) }));
  }
  const byGroup = async (f: RequestFilter, by: BreakdownBy) =>
    sortBreakdown(
      (await aggregate(f, (d) => groupSql(by, (v) => d.bind(v), PROPERTY_VALUE))).map((r) => ({
        group: String(r.k),
        ...r.numbers,
      })),
    );
  return {
    async usageSeries(f, bucket) {
      const rolled = bucket === 'day' ? await rollupUsage(rollup, f, 'day', minRows) : null;
      if (rolled) return seriesPoints(rolled.groups);
      const rows = await aggregate(f, `date_trunc('${bucket}', created_at, 'UTC')`);
      return rows.map((r) => ({ bucket: isoOrNull(r.k)!, ...r.numbers }));
    },
    async usageBreakdown(f, by) {
      const rolled = await rollupUsage(rollup, f, by, minRows);
      return rolled ? sortBreakdown(breakdownRows(rolled.groups)) : byGroup(f, by);
    },
    async usageTop(f, by, rank, limit) {
      const rolled = await rollupUsage(rollup, f, by, minRows, { rank, limit });
      if (rolled) return { rows: breakdownRows(rolled.groups), total_groups: rolled.total };
      return topGroups(await byGroup(f, by), rank, limit);
    },
    async usageSeriesSplit(f, bucket, by, groups) {
      return (
        (bucket === 'day' ? await rollupSplit(rollup, f, by, groups) : null) ?? split(f, bucket, by, groups)
      );
    },
  };
}

/** The rollup reads' queries on PostgreSQL. */
function pgRollupBackend(pool: pg.Pool, split: LogStore['usageSeriesSplit']): RollupBackend {
  return {
    async coveredDay() {
      const { rows } = await pool.query<{ covered_day: string }>('SELECT covered_day FROM usage_daily_state');
      return rows[0]!.covered_day;
    },
    async readRollup(build) {
      const params: unknown[] = [];
      const sql = build(dialect(params));
      return (await pool.query<RollupReadRow>(sql, params)).rows;
    },
    concat: DIALECT.concat,
    binary: (expr) => `${expr} COLLATE "C"`,
    groupSql: (by, bind) => groupSql(by, bind, PROPERTY_VALUE),
    async rowsByBucket(f, by, only) {
      const params: unknown[] = [];
      const d = dialect(params);
      const key =
        by === 'day'
          ? `date_trunc('day', created_at, 'UTC')`
          : groupSql(by, (v) => d.bind(v), PROPERTY_VALUE);
      let where = buildWhere(f, d);
      if (only) where += ` AND ${key} IN (${only.map((v) => d.bind(v)).join(', ')})`;
      const { rows } = await pool.query<AggregateRow & { k: unknown; lb: number }>(
        `SELECT ${key} AS k, ${LATENCY_BUCKET_SQL} AS lb, ${AGGREGATE_SQL} FROM requests WHERE ${where} GROUP BY 1, 2`,
        params,
      );
      return rows.map((r) => ({ ...r, k: by === 'day' ? isoOrNull(r.k)! : String(r.k) }));
    },
    rowsSplit: (f, by, groups) => split(f, 'day', by, groups),
  };
}

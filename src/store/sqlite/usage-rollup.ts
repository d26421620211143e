/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/**
 * The daily usage rollup on SQLite (../usage-rollup.ts): its tables, the rows a batch inserted added in the
 * batch's transaction, the background fill of the days before it, retention's cut, and the reads.
 */
import {
  AGGREGATE_SQL,
  buildWhere,
  groupSql,
  idsBefore,
  idsFrom,
  LOG_COLUMNS,
  percentileCont,
  sortBreakdown,
  sortedNumbers,
  topGroups,
  toUsageNumbers,
  type AggregateRow,
  type LogColumn,
  type WhereDialect,
} from '../log-query.js';
import {
  histogramText,
  latencyBucket,
  LATENCY_BUCKET_SQL,
  mergeHistogramTexts,
  type Histogram,
} from '../latency-histogram.js';
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
  PROPERTY_DIM,
  ROLLUP_KEY,
  ROLLUP_SUMS,
  initialCoveredDay,
  rollupAddSql,
  rollupTableSql,
  type RollupDialect,
} from '../usage-rollup.js';
import type { BreakdownBy, LogStore, RequestFilter } from '../types.js';
import type { Db, StatementCache } from './db.js';
import type { SqlValue } from './driver.js';

const DIALECT: RollupDialect = {
  day: 'substr(created_at, 1, 10)',
  properties: 'json_each(src.properties)',
  concat: (expr) => `group_concat(${expr})`,
  merge: (a, b) => `usage_latency_merge(${a}, ${b})`,
};

/** Log migration 19: the tables, empty; covered from the day after the newest row (the fill does the rest). */
export function createUsageRollup(db: Db): void {
  db.exec(
    rollupTableSql({
      text: 'TEXT',
      int: 'INTEGER',
      real: 'REAL',
      tableSuffix: ' STRICT, WITHOUT ROWID',
      stateSuffix: ' STRICT',
    }),
  );
  const newest = db
    .prepare<[], { created_at: string }>('SELECT created_at FROM requests ORDER BY id DESC LIMIT 1')
    .get();
  db.prepare<[string]>('INSERT INTO usage_daily_state (id, covered_day) VALUES (1, ?)').run(
    initialCoveredDay(newest?.created_at ?? null),
  );
}

/** The connection's histogram merge, which the rollup's upsert calls (PostgreSQL's is SQL). */
export function registerRollupFunctions(db: Db): void {
  db.function('usage_latency_merge', (a: SqlValue, b: SqlValue) =>
    mergeHistogramTexts(a === null ? null : String(a), b === null ? null : String(b)),
  );
}

/** Asked each batch: cheap (the schema is in memory). */
const HAS_ROLLUP_SQL =
  "SELECT COUNT(*) AS n FROM sqlite_schema WHERE type = 'table' AND name = 'usage_daily_state'";

const UPSERT_SQL = `INSERT INTO usage_daily (${[...ROLLUP_KEY, ...ROLLUP_SUMS, 'latency'].join(', ')})
  VALUES (${[...ROLLUP_KEY, ...ROLLUP_SUMS, 'latency'].map(() => '?').join(', ')})
  ON CONFLICT (${ROLLUP_KEY.join(', ')}) DO UPDATE SET
  ${ROLLUP_SUMS.map((c) => `${c} = usage_daily.${c} + excluded.${c}`).join(', ')},
  latency = usage_latency_merge(usage_daily.latency, excluded.latency)`;

const at = (c: LogColumn) => LOG_COLUMNS.indexOf(c);
const COL = {
  org_id: at('org_id'),
  account_id: at('account_id'),
  key_id: at('key_id'),
  created_at: at('created_at'),
  provider: at('provider'),
  model: at('model'),
  credential_fingerprint: at('credential_fingerprint'),
  end_user: at('end_user'),
  session: at('session'),
  properties: at('properties'),
  status: at('status'),
  outcome: at('outcome'),
  input_tokens: at('input_tokens'),
  output_tokens: at('output_tokens'),
  cache_read_tokens: at('cache_read_tokens'),
  cost_usd: at('cost_usd'),
  price_source: at('price_source'),
  latency_ms: at('latency_ms'),
};

/** SQLite's LIKE 'prefix%': ASCII letters in either case. */
const startsLike = (v: unknown, prefix: string) =>
  typeof v === 'string' && v.slice(0, prefix.length).toLowerCase() === prefix;

/**
 * Adds rows a batch just inserted (encoded, in LOG_COLUMNS order) to the rollup, on the covered days: summed
 * in JS into one increment per rollup row (rollupAddSql's dimensions and AGGREGATE_SQL's sums, which the
 * fill computes in SQL), then one upsert each. Reading the rows back in one statement cost ~20 µs a row on
 * the log writer's thread; this ~5. A file not yet migrated to the rollup (a test writing an older schema)
 * has none to add to.
 */
export function addInsertedRows(stmt: StatementCache, rows: readonly (readonly SqlValue[])[]): void {
  if (rows.length === 0 || stmt<[], { n: number }>(HAS_ROLLUP_SQL).get()!.n === 0) return;
  const covered = stmt<[], { covered_day: string }>('SELECT covered_day FROM usage_daily_state').get()!
    .covered_day;
  const deltas = new Map<string, { key: string[]; sums: number[]; hist: Histogram }>();
  for (const r of rows) {
    const day = String(r[COL.created_at]).slice(0, 10);
    if (day < covered) continue;
    const str = (i: number) => (r[i] === null ? '' : String(r[i]));
    const org = str(COL.org_id);
    const account = str(COL.account_id);
    const keyId = str(COL.key_id);
    const cost = r[COL.cost_usd];
    const source = r[COL.price_source];
    const status = Number(r[COL.status]);
    const sums = [
      1,
      status >= 400 || r[COL.outcome] !== 'ok' ? 1 : 0,
      Number(r[COL.input_tokens] ?? 0),
      Number(r[COL.output_tokens] ?? 0),
      Number(r[COL.cache_read_tokens] ?? 0),
      cost === null ? 0 : Number(cost),
      cost === null && !startsLike(source, 'not billed') ? 1 : 0,
      startsLike(source, 'partial:') ? 1 : 0,
    ];
    const lb = latencyBucket(Number(r[COL.latency_ms]));
    const add = (dim: string, key: string, value: string) => {
      const k = [org, dim, day, account, key, value];
      const id = k.join('\u0000');
      let d = deltas.get(id);
      if (!d) deltas.set(id, (d = { key: k, sums: ROLLUP_SUMS.map(() => 0), hist: new Map() }));
      for (let i = 0; i < sums.length; i++) d.sums[i]! += sums[i]!;
      d.hist.set(lb, (d.hist.get(lb) ?? 0) + 1);
    };
    add('total', keyId, '');
    add('model', keyId, str(COL.model));
    add('provider', keyId, str(COL.provider));
    add('credential_fingerprint', keyId, str(COL.credential_fingerprint));
    add('end_user', '', str(COL.end_user));
    add('session', '', str(COL.session));
    const props = r[COL.properties];
    if (typeof props === 'string' && props !== '{}')
      for (const [name, value] of Object.entries(JSON.parse(props) as Record<string, string | null>))
        add(PROPERTY_DIM + name, '', value ?? '');
  }
  const upsert = stmt<SqlValue[]>(UPSERT_SQL);
  for (const d of deltas.values()) upsert.run(...d.key, ...d.sums, histogramText(d.hist));
}

const ADD_RANGE_SQL = rollupAddSql(
  DIALECT,
  'requests',
  'id >= ? AND id < ? AND created_at >= ? AND created_at < ?',
);

/**
 * Adds the newest uncovered day to the rollup (every row of it, none counted yet) and covers it, in one
 * write transaction; false when no row is left before covered_day. Days without rows are covered with it.
 */
export function fillOneDay(db: Db, stmt: StatementCache): boolean {
  return db.transaction(
    () => {
      const covered = stmt<[], { covered_day: string }>('SELECT covered_day FROM usage_daily_state').get()!
        .covered_day;
      const coveredIso = `${covered}T00:00:00.000Z`;
      const newest = stmt<[string, string], { created_at: string }>(
        'SELECT created_at FROM requests WHERE id < ? AND created_at < ? ORDER BY id DESC LIMIT 1',
      ).get(idsBefore(coveredIso), coveredIso);
      if (!newest) return false;
      const day = newest.created_at.slice(0, 10);
      const dayIso = `${day}T00:00:00.000Z`;
      stmt<string[]>(ADD_RANGE_SQL).run(idsFrom(dayIso), idsBefore(coveredIso), dayIso, coveredIso);
      stmt<[string]>('UPDATE usage_daily_state SET covered_day = ?').run(day);
      return true;
    },
    { immediate: true },
  );
}

/**
 * Before retention deletes rows older than `before`: the day it cuts into and those before leave the rollup
 * (read from the rows again until the fill adds back what remains of them).
 */
export function pruneRollup(db: Db, stmt: StatementCache, before: string): void {
  const day = coveredAfterPrune(before);
  db.transaction(
    () => {
      stmt<[string]>('UPDATE usage_daily_state SET covered_day = max(covered_day, ?)').run(day);
      stmt<[string]>('DELETE FROM usage_daily WHERE day < ?').run(day);
    },
    { immediate: true },
  );
}

/** A property's value in a row (null when it has none), the name given as a placeholder. */
const PROPERTY_VALUE = (name: string) =>
  `(SELECT value FROM json_each(requests.properties) WHERE key = ${name})`;

/**
 * Usage series, breakdowns and split series on SQLite: from the rollup where it answers (../usage-rollup.ts),
 * else from the rows.
 */
export function sqliteUsageReads(
  stmt: StatementCache,
  dialect: (params: (string | number)[]) => WhereDialect,
  split: LogStore['usageSeriesSplit'],
  bucketSql: Record<'minute' | 'hour' | 'day', string>,
  minRows: number,
): Pick<LogStore, 'usageSeries' | 'usageBreakdown' | 'usageTop' | 'usageSeriesSplit'> {
  const rollup = sqliteRollupBackend(stmt, dialect, split, bucketSql.day);
  /**
   * From the rows: sums in SQL; percentiles in JS over each group's latencies (SQLite has no
   * percentile_cont), which the same statement hands over as one text per group. 17 significant digits read
   * back as the same double; a REAL's own text does not everywhere (node:sqlite's SQLite 3.51 on Node 22
   * writes 1/3 with 15). Reading the rows a second time for the latencies cost as much again.
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
    return groups.map(({ latencies, ...s }) => {
      const sorted = sortedNumbers(latencies);
      return {
        key: s.k,
        numbers: toUsageNumbers(s, percentileCont(sorted, 0.5), percentileCont(sorted, 0.95)),
      };
    });
  }
  const byGroup = (f: RequestFilter, by: BreakdownBy) =>
    sortBreakdown(breakdownRows(aggregate(f, (d) => groupSql(by, (v) => d.bind(v), PROPERTY_VALUE))));
  return {
    async usageSeries(f, bucket) {
      const rolled = bucket === 'day' ? await rollupUsage(rollup, f, 'day', minRows) : null;
      return seriesPoints(rolled?.groups ?? aggregate(f, bucketSql[bucket]));
    },
    async usageBreakdown(f, by) {
      const rolled = await rollupUsage(rollup, f, by, minRows);
      return rolled ? sortBreakdown(breakdownRows(rolled.groups)) : byGroup(f, by);
    },
    async usageTop(f, by, rank, limit) {
      const rolled = await rollupUsage(rollup, f, by, minRows, { rank, limit });
      if (rolled) return { rows: breakdownRows(rolled.groups), total_groups: rolled.total };
      return topGroups(byGroup(f, by), rank, limit);
    },
    async usageSeriesSplit(f, bucket, by, groups) {
      return (
        (bucket === 'day' ? await rollupSplit(rollup, f, by, groups) : null) ?? split(f, bucket, by, groups)
      );
    },
  };
}

/** The rollup reads' queries on SQLite. */
function sqliteRollupBackend(
  stmt: StatementCache,
  dialect: (params: (string | number)[]) => WhereDialect,
  split: LogStore['usageSeriesSplit'],
  daySql: string,
): RollupBackend {
  return {
    async coveredDay() {
      return stmt<[], { covered_day: string }>('SELECT covered_day FROM usage_daily_state').get()!
        .covered_day;
    },
    async readRollup(build) {
      const params: (string | number)[] = [];
      const sql = build(dialect(params));
      return stmt<unknown[], RollupReadRow>(sql).all(...params);
    },
    concat: DIALECT.concat,
    // SQLite compares text by its bytes (BINARY): UTF-8's order is code points'.
    binary: (expr) => expr,
    groupSql: (by, bind) => groupSql(by, bind, PROPERTY_VALUE),
    async rowsByBucket(f: RequestFilter, by: BreakdownBy | 'day', only?: readonly string[]) {
      const params: (string | number)[] = [];
      const d = dialect(params);
      // Placeholders are positional: the select list's come first.
      const key = by === 'day' ? daySql : groupSql(by, (v) => d.bind(v), PROPERTY_VALUE);
      let where = buildWhere(f, d);
      if (only) where += ` AND ${key} IN (${only.map((v) => d.bind(v)).join(', ')})`;
      return stmt<unknown[], AggregateRow & { k: string; lb: number }>(
        `SELECT ${key} AS k, ${LATENCY_BUCKET_SQL} AS lb, ${AGGREGATE_SQL} FROM requests WHERE ${where} GROUP BY 1, 2`,
      ).all(...params);
    },
    rowsSplit: (f, by, groups) => split(f, 'day', by, groups),
  };
}

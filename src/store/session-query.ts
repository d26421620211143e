/**
 * What both log stores share for sessions and split series: the select lists, the keyset on a session's
 * first row, and turning a driver's row (PostgreSQL's sums arrive as text) into the shared shapes.
 */
import {
  AGGREGATE_SQL,
  decodeCursor,
  encodeCursor,
  groupSql,
  toUsageNumbers,
  type AggregateRow,
} from './log-query.js';
import type { Page, RequestFilter, SessionSummary, SplitBy, UsageSplitPoint } from './types.js';

/**
 * The session list's select list, given how each database writes a row's end in epoch milliseconds and its
 * distinct non-null values of a column as an array (or JSON array text).
 */
export function sessionSelectSql(endMs: string, distinct: (column: string) => string): string {
  return `session, MIN(id) AS first_id, MIN(created_at) AS started_at, MAX(${endMs}) AS end_ms,
    ${AGGREGATE_SQL}, ${distinct('model')} AS models, ${distinct('end_user')} AS end_users`;
}

/** The filters the session list's page pick answers from the (org_id, session, id, …) index alone. */
const INDEXED_FILTERS = new Set(['org_id', 'account_id', 'from', 'to']);

/**
 * The session list in one statement (one snapshot). Grouping every session in range with its sums read a
 * million rows from the table to keep fifty, so when the filter is an organization and a time range the page's
 * sessions are picked first, by their first row in range alone, from the (org_id, session, id, created_at,
 * end_user) index without the table; only those are summed. Over a month of 50,000 sessions that reads the
 * index's entries in range once (a tenth of a second on SQLite, a third on PostgreSQL), where a walk of two
 * seeks a session took seconds on PostgreSQL. A narrower filter (an end user, a model, a search) keeps the
 * plain grouping, which the database starts from that filter's own index.
 * `where` is called once per use so that positional placeholders are bound in text order.
 */
export function sessionListSql(
  select: string,
  f: RequestFilter,
  where: () => string,
  cursor: string | null | undefined,
  limit: number,
  bind: (v: string | number) => string,
): string {
  const picked =
    f.org_id !== undefined && Object.entries(f).every(([k, v]) => v === undefined || INDEXED_FILTERS.has(k));
  // The keyset: sessions whose first row is older than the previous page's last.
  const having = () => (cursor ? ` HAVING MIN(id) < ${bind(decodeCursor(cursor))}` : '');
  if (!picked) {
    return `SELECT ${select} FROM requests WHERE ${where()} AND session IS NOT NULL
      GROUP BY session${having()} ORDER BY first_id DESC LIMIT ${bind(limit)}`;
  }
  return `WITH page AS (
      SELECT session AS page_session FROM requests WHERE ${where()} AND session IS NOT NULL
      GROUP BY session${having()} ORDER BY MIN(id) DESC LIMIT ${bind(limit)}
    )
    SELECT ${select} FROM requests
    WHERE ${where()} AND session IS NOT NULL AND session IN (SELECT page_session FROM page)
    GROUP BY session ORDER BY first_id DESC`;
}

export type SessionRow = AggregateRow & {
  session: string;
  first_id: string;
  started_at: string;
  end_ms: number | string;
  models: unknown;
  end_users: unknown;
};

/** Distinct values as the drivers hand them (an array, or JSON array text) without nulls, sorted. */
function values(v: unknown): string[] {
  const list: unknown = typeof v === 'string' ? JSON.parse(v) : v;
  if (!Array.isArray(list)) return [];
  return list.filter((x): x is string => typeof x === 'string').sort();
}

/** A page of session rows (read with limit + 1 to know whether another page follows). */
export function sessionPage(rows: SessionRow[], limit: number): Page<SessionSummary> {
  const items = rows.slice(0, limit).map((r): SessionSummary => {
    const { latency_p50_ms: _p50, latency_p95_ms: _p95, ...numbers } = toUsageNumbers(r, null, null);
    const start = Date.parse(r.started_at);
    // Whole milliseconds: a latency is fractional, a time is not.
    const duration = Math.max(0, Math.round(Number(r.end_ms) - start));
    return {
      session: r.session,
      started_at: new Date(start).toISOString(),
      ended_at: new Date(start + duration).toISOString(),
      duration_ms: duration,
      ...numbers,
      models: values(r.models),
      end_users: values(r.end_users),
    };
  });
  const last = rows.length > limit ? rows[limit - 1] : undefined;
  return { items, next_cursor: last ? encodeCursor(last.first_id) : null };
}

/**
 * A split series' select list: the bucket, the group (the column's value when it is one of the named
 * groups, else NULL) and the sums. The group's placeholders are bound before anything else the caller binds.
 */
export function splitSelectSql(
  bucketSql: string,
  by: SplitBy,
  groups: readonly string[],
  bind: (v: string) => string,
): string {
  const value = groupSql(by, bind, () => 'NULL');
  const group =
    groups.length === 0
      ? 'NULL'
      : `CASE WHEN ${value} IN (${groups.map((g) => bind(g)).join(', ')}) THEN ${value} END`;
  return `${bucketSql} AS b, ${group} AS g, ${AGGREGATE_SQL}`;
}

export function toSplitPoint(bucket: string, r: AggregateRow & { g: string | null }): UsageSplitPoint {
  const { latency_p50_ms: _p50, latency_p95_ms: _p95, ...numbers } = toUsageNumbers(r, null, null);
  return { bucket, group: r.g, ...numbers };
}

/** Split points in one order on both backends: by bucket, then the named groups by name, "other" last. */
export function sortSplit(points: UsageSplitPoint[]): UsageSplitPoint[] {
  const key = (p: UsageSplitPoint) => `${p.bucket}\u0000${p.group === null ? '\uffff' : p.group}`;
  return points.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** Sessions and split series on PostgreSQL: the log store's reads that group by session or by a column's top values. */
import type pg from 'pg';
import { buildWhere, decodeCursor, encodeCursor, SUMMARY_COLUMNS, type AggregateRow } from '../log-query.js';
import {
  sessionListSql,
  sessionPage,
  sessionSelectSql,
  sortSplit,
  splitSelectSql,
  toSplitPoint,
  type SessionRow,
} from '../session-query.js';
import type { LogStore, RequestSummary } from '../types.js';
import { isoOrNull } from './db.js';
import { dialect } from './log-dialect.js';

type Row = Record<string, unknown>;

/**
 * The session list's select list on PostgreSQL: a row's end is its arrival (microseconds) plus its latency,
 * in numeric, exact; distinct values as a text array.
 */
const SESSION_SELECT = sessionSelectSql(
  'extract(epoch FROM created_at) * 1000 + latency_ms',
  (column) => `array_agg(DISTINCT ${column})`,
);

export function pgSessionReads(
  pool: pg.Pool,
  decodeRow: (row: Row) => RequestSummary,
): Pick<LogStore, 'usageSeriesSplit' | 'listSessions' | 'sessionCalls'> {
  return {
    async usageSeriesSplit(f, bucket, by, groups) {
      const params: unknown[] = [];
      const d = dialect(params);
      const select = splitSelectSql(`date_trunc('${bucket}', created_at, 'UTC')`, by, groups, (v) =>
        d.bind(v),
      );
      const where = buildWhere(f, d);
      const { rows } = await pool.query<AggregateRow & { b: unknown; g: string | null }>(
        `SELECT ${select} FROM requests WHERE ${where} GROUP BY 1, 2`,
        params,
      );
      return sortSplit(rows.map((r) => toSplitPoint(isoOrNull(r.b)!, r)));
    },

    async listSessions(f, opts) {
      const params: unknown[] = [];
      const d = dialect(params);
      const limit = Math.max(1, Math.floor(opts.limit));
      const sql = sessionListSql(
        SESSION_SELECT,
        f,
        () => buildWhere(f, d),
        opts.cursor,
        limit + 1,
        (v) => d.bind(v),
      );
      const { rows } = await pool.query<Omit<SessionRow, 'started_at'> & { started_at: unknown }>(
        sql,
        params,
      );
      return sessionPage(
        rows.map((r) => ({ ...r, started_at: isoOrNull(r.started_at)! })),
        limit,
      );
    },

    async sessionCalls(scope, session, opts) {
      const params: unknown[] = [];
      const d = dialect(params);
      const limit = Math.max(1, Math.floor(opts.limit));
      let where = buildWhere({ ...scope, session }, d);
      if (opts.cursor) where += ` AND id > ${d.bind(decodeCursor(opts.cursor))}`;
      const { rows } = await pool.query<Row>(
        `SELECT ${SUMMARY_COLUMNS.join(', ')} FROM requests WHERE ${where} ORDER BY id LIMIT ${d.bind(limit + 1)}`,
        params,
      );
      const items = rows.slice(0, limit).map(decodeRow);
      return { items, next_cursor: rows.length > limit ? encodeCursor(items[items.length - 1]!.id) : null };
    },
  };
}

/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/** Sessions and split series on SQLite: the log store's reads that group by session or by a column's top values. */
import {
  buildWhere,
  decodeCursor,
  encodeCursor,
  type AggregateRow,
  type WhereDialect,
} from '../log-query.js';
import {
  sessionListSql,
  sessionPage,
  sessionSelectSql,
  sortSplit,
  splitSelectSql,
  toSplitPoint,
  type SessionRow,
} from '../session-query.js';
import { SUMMARY_COLUMNS } from '../log-query.js';
import type { LogStore, RequestSummary } from '../types.js';
import type { StatementCache } from './db.js';

type DbRow = Record<string, unknown>;

/**
 * The session list's select list on SQLite: a row's end is its arrival (ISO text, whole milliseconds)
 * plus its latency, exact; distinct values as JSON array text.
 */
const SESSION_SELECT = sessionSelectSql(
  "CAST(strftime('%s', created_at) AS INTEGER) * 1000 + CAST(substr(created_at, 21, 3) AS INTEGER) + latency_ms",
  (column) => `json_group_array(DISTINCT ${column})`,
);

export function sqliteSessionReads(
  stmt: StatementCache,
  dialect: (params: (string | number)[]) => WhereDialect,
  decodeRow: (row: DbRow) => RequestSummary,
  bucketSql: Record<'minute' | 'hour' | 'day', string>,
): Pick<LogStore, 'usageSeriesSplit' | 'listSessions' | 'sessionCalls'> {
  return {
    async usageSeriesSplit(f, bucket, by, groups) {
      const params: (string | number)[] = [];
      const d = dialect(params);
      // Placeholders are positional: the select list's come first.
      const select = splitSelectSql(bucketSql[bucket], by, groups, (v) => d.bind(v));
      const where = buildWhere(f, d);
      const rows = stmt<unknown[], AggregateRow & { b: string; g: string | null }>(
        `SELECT ${select} FROM requests WHERE ${where} GROUP BY b, g`,
      ).all(...params);
      return sortSplit(rows.map((r) => toSplitPoint(r.b, r)));
    },

    async listSessions(f, opts) {
      const params: (string | number)[] = [];
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
      const rows = stmt<unknown[], SessionRow>(sql).all(...params);
      return sessionPage(rows, limit);
    },

    async sessionCalls(scope, session, opts) {
      const params: (string | number)[] = [];
      const d = dialect(params);
      const limit = Math.max(1, Math.floor(opts.limit));
      let where = buildWhere({ ...scope, session }, d);
      if (opts.cursor) where += ` AND id > ${d.bind(decodeCursor(opts.cursor))}`;
      const rows = stmt<unknown[], DbRow>(
        `SELECT ${SUMMARY_COLUMNS.join(', ')} FROM requests WHERE ${where} ORDER BY id LIMIT ${d.bind(limit + 1)}`,
      ).all(...params);
      const items = rows.slice(0, limit).map(decodeRow);
      return { items, next_cursor: rows.length > limit ? encodeCursor(items[items.length - 1]!.id) : null };
    },
  };
}

/**
 * The request list's sorted pages are index ranges on both stores, never a sort of the organization's rows:
 * over a million rows a sort by tokens or latency took ~2 s and cheapest first ~13 s, where a range takes
 * milliseconds (bench/views.ts). Checked on the query plan of the statement the store runs (pageSql),
 * first page and a page after a cursor, each key either way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { pageCursor, pageSql, SUMMARY_COLUMNS, type FlagTest } from '../src/store/log-query.js';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { openSqlite } from '../src/store/sqlite/db.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { NEWEST_FIRST } from '../src/store/log-query.js';
import { REQUEST_SORT_KEYS, type RequestFilter, type RequestSort } from '../src/store/types.js';
import { makeLogRow, toSummary } from './helpers/log-rows.js';
import { createTestDatabase } from './helpers/pg.js';

const dir = mkdtempSync(join(tmpdir(), 'keyrelay-sort-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The statement listRequests runs for a page of org-1, and its bound values. */
function page(
  sort: RequestSort,
  cursor: string | null,
  placeholder: 'sqlite' | 'pg',
  test: FlagTest,
  filter: RequestFilter = { org_id: 'org-1' },
) {
  const params: (string | number)[] = [];
  const d = {
    bind: (v: string | number) => (params.push(v), placeholder === 'pg' ? `$${params.length}` : '?'),
    propertyEquals: () => 'TRUE',
    propertyPresent: () => 'TRUE',
    search: () => 'TRUE',
  };
  return { sql: pageSql(SUMMARY_COLUMNS.join(', '), filter, d, sort, cursor, 51, test), params };
}

const priced = makeLogRow({ org_id: 'org-1', account_id: 'acct-1' });
const unpriced = makeLogRow({ org_id: 'org-1', account_id: 'acct-1', cost_usd: null });

/** Every sort either way, first page and after a cursor (for cost, also one in the unpriced rows). */
function* pages(): Generator<{ sort: RequestSort; cursor: string | null; label: string; union: boolean }> {
  for (const by of REQUEST_SORT_KEYS) {
    for (const dir of ['asc', 'desc'] as const) {
      const sort = { by, dir };
      const inUnpriced = by === 'cost' ? pageCursor(sort, toSummary(unpriced)) : null;
      for (const cursor of [null, pageCursor(sort, toSummary(priced)), ...(inUnpriced ? [inUnpriced] : [])])
        yield {
          sort,
          cursor,
          label: `${by} ${dir}${cursor ? ` after a cursor${cursor === inUnpriced ? ' in the unpriced' : ''}` : ''}`,
          // Cost's first pages are a union of two ranges, sorted: at most two pages of rows.
          union: by === 'cost' && cursor !== inUnpriced,
        };
    }
  }
}

function plan(path: string, sort: RequestSort, cursor: string | null, filter?: RequestFilter): string[] {
  const db = openSqlite(path);
  try {
    const { sql, params } = page(sort, cursor, 'sqlite', '=', filter);
    return db
      .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...params)
      .map((r) => r.detail);
  } finally {
    db.close();
  }
}

describe('sorted request pages', () => {
  it('are index ranges on SQLite (cost: one for the priced rows, one for the unpriced)', async () => {
    const path = join(dir, 'requests.db');
    const store = new SqliteLogStore(path);
    await store.migrate();
    await store.insertBatch([priced, unpriced]);
    await store.close();

    for (const { sort, cursor, label, union } of pages()) {
      const lines = plan(path, sort, cursor);
      const reads = lines.filter((l) => / requests /.test(`${l} `));
      expect(reads.length, `${label}: ${lines.join(' | ')}`).toBeGreaterThan(0);
      for (const read of reads) expect(read, label).toMatch(/^SEARCH requests USING (COVERING )?INDEX /);
      const sorts = lines.filter((l) => l.includes('TEMP B-TREE'));
      expect(sorts, `${label}: ${lines.join(' | ')}`).toHaveLength(union ? 1 : 0);
    }
  });

  it('are index ranges on PostgreSQL', async () => {
    const db = await createTestDatabase();
    const store = new PgLogStore(db.url);
    const client = new pg.Client({ connectionString: db.url });
    try {
      await store.migrate();
      await store.insertBatch([priced, unpriced]);
      await client.connect();
      // A two-row table is read whole and sorted whatever the indexes: these make any other plan dearer
      // than an index's order, so a page that needs a sort of the rows shows one.
      await client.query('SET enable_seqscan = off; SET enable_sort = off; SET enable_bitmapscan = off');
      for (const { sort, cursor, label, union } of pages()) {
        const { sql, params } = page(sort, cursor, 'pg', 'IS');
        const lines = (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)).rows.map(
          (r) => r['QUERY PLAN'],
        );
        const sorts = lines.filter((l) => /\bSort\b/.test(l) && !l.includes('Sort Key'));
        expect(sorts, `${label}: ${lines.join('\n')}`).toHaveLength(union ? 1 : 0);
      }
    } finally {
      await client.end();
      await store.close();
      await db.drop();
    }
  });
});

/** One end user's rows and one session's, newest first: the end-user and session views' pages. */
const NAMED: [RequestFilter, string][] = [
  [{ org_id: 'org-1', end_user: 'user-42' }, 'requests_org_end_user'],
  [{ org_id: 'org-1', session: 'sess-7' }, 'requests_org_session_page'],
];

describe("one end user's or one session's page", () => {
  it('is a range of its own index on SQLite', async () => {
    const path = join(dir, 'named.db');
    const store = new SqliteLogStore(path);
    await store.migrate();
    await store.insertBatch([priced, unpriced]);
    await store.close();
    for (const [filter, index] of NAMED) {
      const lines = plan(path, NEWEST_FIRST, null, filter);
      expect(lines.join(' | ')).toMatch(new RegExp(`^SEARCH requests USING INDEX ${index} `));
      expect(lines.filter((l) => l.includes('TEMP B-TREE'))).toEqual([]);
    }
  });

  it('is a range of its own index on PostgreSQL', async () => {
    const db = await createTestDatabase();
    const store = new PgLogStore(db.url);
    const client = new pg.Client({ connectionString: db.url });
    try {
      await store.migrate();
      await store.insertBatch([priced, unpriced]);
      await client.connect();
      await client.query('SET enable_seqscan = off; SET enable_sort = off; SET enable_bitmapscan = off');
      for (const [filter, index] of NAMED) {
        const { sql, params } = page(NEWEST_FIRST, null, 'pg', 'IS', filter);
        const lines = (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)).rows.map(
          (r) => r['QUERY PLAN'],
        );
        expect(lines.join('\n')).toContain(`Index Scan Backward using ${index} on requests`);
      }
    } finally {
      await client.end();
      await store.close();
      await db.drop();
    }
  });
});

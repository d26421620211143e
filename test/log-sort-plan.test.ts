/**
 * The request list's sorted pages are index ranges on SQLite, never a sort of the organization's every row:
 * over a million rows a sort by tokens or latency took ~2 s and cheapest first ~13 s, where a range takes
 * milliseconds (bench/views.ts). Checked on the query plan of the statement the store runs (pageSql),
 * first page and a page after a cursor, each key either way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pageCursor, pageSql, SUMMARY_COLUMNS } from '../src/store/log-query.js';
import { openSqlite } from '../src/store/sqlite/db.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { REQUEST_SORT_KEYS, type RequestSort } from '../src/store/types.js';
import { makeLogRow, toSummary } from './helpers/log-rows.js';

const dir = mkdtempSync(join(tmpdir(), 'keyrelay-sort-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function plan(path: string, sort: RequestSort, cursor: string | null): string[] {
  const db = openSqlite(path);
  try {
    const params: (string | number)[] = [];
    const d = {
      bind: (v: string | number) => (params.push(v), '?'),
      propertyEquals: () => 'TRUE',
      propertyPresent: () => 'TRUE',
      search: () => 'TRUE',
    };
    const sql = pageSql(SUMMARY_COLUMNS.join(', '), { org_id: 'org-1' }, d, sort, cursor, 51);
    return db
      .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...params)
      .map((r) => r.detail);
  } finally {
    db.close();
  }
}

describe('sorted request pages on SQLite', () => {
  it('read one index range per page (cost: one for the priced rows, one for the unpriced)', async () => {
    const path = join(dir, 'requests.db');
    const store = new SqliteLogStore(path);
    await store.migrate();
    const priced = makeLogRow({ org_id: 'org-1', account_id: 'acct-1' });
    const unpriced = makeLogRow({ org_id: 'org-1', account_id: 'acct-1', cost_usd: null });
    await store.insertBatch([priced, unpriced]);
    await store.close();

    for (const by of REQUEST_SORT_KEYS) {
      for (const dir of ['asc', 'desc'] as const) {
        const sort = { by, dir };
        const cursors = [null, pageCursor(sort, toSummary(priced))];
        if (by === 'cost') cursors.push(pageCursor(sort, toSummary(unpriced)));
        for (const cursor of cursors) {
          const lines = plan(path, sort, cursor);
          const label = `${by} ${dir}${cursor ? ' after a cursor' : ''}`;
          const reads = lines.filter((l) => / requests /.test(`${l} `));
          expect(reads.length, `${label}: ${lines.join(' | ')}`).toBeGreaterThan(0);
          for (const read of reads) expect(read, label).toMatch(/^SEARCH requests USING (COVERING )?INDEX /);
          // The only sort allowed: cost's union of two ranges, at most two pages of rows.
          const sorts = lines.filter((l) => l.includes('TEMP B-TREE'));
          const union = by === 'cost' && !(cursor && cursor === cursors[2]);
          expect(sorts, `${label}: ${lines.join(' | ')}`).toHaveLength(union ? 1 : 0);
        }
      }
    }
  });
});

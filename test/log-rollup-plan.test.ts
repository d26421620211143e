/**
 * A month's usage read from the hourly rollup is a range of one of its indexes on SQLite, never a scan of
 * every organization's rollup rows: by organization (the primary key), by account (the credentials view,
 * the CLI) and by key (a key's models). Checked on the plan of the statement the store runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rollupRange, rollupSelectSql, rollupWhere } from '../src/store/rollup.js';
import { openSqlite } from '../src/store/sqlite/db.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import type { RequestFilter } from '../src/store/types.js';

const dir = mkdtempSync(join(tmpdir(), 'keyrelay-rollup-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MONTH = { from: '2026-10-28T09:15:00.000Z', to: '2026-11-27T09:15:00.000Z' };

describe('the hourly rollup read', () => {
  it('is a range of an index on SQLite, by organization, account or key', async () => {
    const path = join(dir, 'requests.db');
    const store = new SqliteLogStore(path);
    await store.migrate();
    await store.close();
    const db = openSqlite(path);
    try {
      const cases: Array<[RequestFilter, RegExp]> = [
        [
          { org_id: 'org-1', ...MONTH },
          /SEARCH usage_hourly USING PRIMARY KEY \(org_id=\? AND hour>\? AND hour<\?\)/,
        ],
        [
          { org_id: 'org-1', account_id: 'acct-1', exclude_key_ids: ['k9'], ...MONTH },
          /SEARCH usage_hourly USING (PRIMARY KEY \(org_id=\? AND hour>\? AND hour<\?\)|INDEX usage_hourly_account)/,
        ],
        [
          { account_id: 'acct-1', ...MONTH },
          /SEARCH usage_hourly USING INDEX usage_hourly_account \(account_id=\? AND hour>\? AND hour<\?\)/,
        ],
        [
          { org_id: 'org-1', key_id: 'k1', ...MONTH },
          /SEARCH usage_hourly USING (INDEX usage_hourly_key \(key_id=\? AND hour>\? AND hour<\?\)|PRIMARY KEY)/,
        ],
      ];
      for (const [f, plan] of cases) {
        const params: string[] = [];
        const where = rollupWhere(f, rollupRange(f)!, (v) => (params.push(v), '?'));
        const sql = `SELECT model AS k, ${rollupSelectSql((c) => `group_concat(${c})`)} FROM usage_hourly WHERE ${where} GROUP BY k`;
        const rows = db.prepare<string[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`).all(...params);
        const text = rows.map((r) => r.detail).join('\n');
        expect(text, JSON.stringify(f)).toMatch(plan);
        expect(text, JSON.stringify(f)).not.toMatch(/SCAN usage_hourly/);
      }
    } finally {
      db.close();
    }
  });
});

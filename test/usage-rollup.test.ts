/**
 * The daily usage rollup through retention, the fill after an upgrade, and on PostgreSQL several instances
 * writing while one fills: every read stays equal to the rows'. Each backend on a database of its own, as a
 * prune deletes every account's rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.js';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { openSqlite } from '../src/store/sqlite/db.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { SqliteLogThread } from '../src/store/sqlite/log-thread.js';
import type { LogStore } from '../src/store/types.js';
import { initialCoveredDay } from '../src/store/usage-rollup.js';
import { describeUsageRollupLifecycle, expectSameReads, seededRows } from './helpers/rollup-contract.js';
import { createTestDatabase, testPool } from './helpers/pg.js';

const UNCOVER = (newest: string | null) => `
  DELETE FROM usage_daily;
  UPDATE usage_daily_state SET covered_day = '${initialCoveredDay(newest)}';`;

describe('usage rollup on SQLite', () => {
  let dir = '';
  const opened: LogStore[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'keyrelay-rollup-'));
    const s = new SqliteLogStore(join(dir, 'requests.db'));
    await s.migrate();
    await s.close();
  });
  afterAll(async () => {
    for (const s of opened) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const open = (rollupMinRows: number) => {
    // The server's store: calls on a worker thread.
    const s = new SqliteLogThread(join(dir, 'requests.db'), { rollupMinRows });
    opened.push(s);
    return s;
  };
  describeUsageRollupLifecycle({
    rolled: () => open(0),
    rows: () => open(Infinity),
    uncover() {
      const db = openSqlite(join(dir, 'requests.db'));
      try {
        const newest = db
          .prepare<[], { created_at: string }>('SELECT created_at FROM requests ORDER BY id DESC LIMIT 1')
          .get();
        db.exec(UNCOVER(newest?.created_at ?? null));
      } finally {
        db.close();
      }
      return Promise.resolve();
    },
  });
});

describe('usage rollup on PostgreSQL', () => {
  let url = '';
  let drop: () => Promise<void> = () => Promise.resolve();
  const opened: LogStore[] = [];
  beforeAll(async () => {
    const db = await createTestDatabase();
    url = db.url;
    drop = () => db.drop();
    const s = new PgLogStore(url);
    await s.migrate();
    await s.close();
  });
  afterAll(async () => {
    for (const s of opened) await s.close();
    await drop();
  });
  const open = (rollupMinRows: number) => {
    const s = new PgLogStore(url, { rollupMinRows });
    opened.push(s);
    return s;
  };
  const uncover = async () => {
    const pool = testPool(url, 1);
    try {
      const { rows } = await pool.query<{ created_at: Date }>(
        'SELECT created_at FROM requests ORDER BY id DESC LIMIT 1',
      );
      await pool.query(UNCOVER(rows[0]?.created_at.toISOString() ?? null));
    } finally {
      await pool.end();
    }
  };
  describeUsageRollupLifecycle({ rolled: () => open(0), rows: () => open(Infinity), uncover });

  it('stays equal to the rows with three instances writing into days the fill is adding meanwhile', async () => {
    const org = `org-${newId()}`;
    const accounts = [`acct-${newId()}`, `acct-${newId()}`];
    const writers = [open(0), open(0), open(0)];
    const rows = open(Infinity);
    const start = Date.parse('2026-04-01T00:00:00.000Z');
    await writers[0]!.insertBatch(seededRows(org, accounts, 400, start));
    await uncover();
    // Each writer's batches span the days being filled; small batches, so many transactions interleave.
    const more = seededRows(org, accounts, 900, start - 3 * 86_400_000);
    const batches = Array.from({ length: 45 }, (_, i) => more.slice(i * 20, i * 20 + 20));
    const fill = (async () => {
      let days = 0;
      while (await writers[0]!.fillUsageRollup()) days++;
      return days;
    })();
    await Promise.all(
      writers.map(async (w, i) => {
        for (let b = i; b < batches.length; b += writers.length) await w.insertBatch(batches[b]!);
      }),
    );
    expect(await fill).toBeGreaterThan(0);
    while (await writers[1]!.fillUsageRollup());
    await expectSameReads(writers[2]!, rows, { org_id: org });
    await expectSameReads(writers[2]!, rows, { account_id: accounts[1]! });
  });
});

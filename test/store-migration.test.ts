/**
 * Upgrading a database from the schema before hard budgets (config migration 3) keeps every key and its
 * limits, on SQLite and on PostgreSQL: existing budgets stay soft, rpm counts billable calls, the new limits
 * start unset, and a change to a new column still reaches the key change feed. Log migration 7 (time ranges
 * by id, two indexes dropped) keeps every row, and the console's time ranges still find them through an
 * index.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runPgMigrations } from '../src/store/postgres/db.js';
import { LOG_MIGRATIONS as PG_LOG_MIGRATIONS } from '../src/store/postgres/log-schema.js';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { CONFIG_MIGRATIONS as PG_MIGRATIONS, PgConfigStore } from '../src/store/postgres/config-store.js';
import {
  CONFIG_MIGRATIONS as SQLITE_MIGRATIONS,
  SqliteConfigStore,
} from '../src/store/sqlite/config-store.js';
import { openSqlite, runSqliteMigrations } from '../src/store/sqlite/db.js';
import { LOG_MIGRATIONS as SQLITE_LOG_MIGRATIONS } from '../src/store/sqlite/log-schema.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { newId } from '../src/ids.js';
import { buildWhere, SUMMARY_COLUMNS } from '../src/store/log-query.js';
import type { ConfigStore, LogStore, RequestFilter } from '../src/store/types.js';
import { makeLogRow } from './helpers/log-rows.js';
import { createTestDatabase, testPool } from './helpers/pg.js';

const NOW = '2026-01-02T03:04:05.000Z';
const ACCOUNT = `INSERT INTO accounts (id, email, password_hash, password_changed_at, created_at)
  VALUES ('a1', 'old@example.com', 'x', '${NOW}', '${NOW}')`;

async function expectUpgraded(store: ConfigStore): Promise<void> {
  await store.migrate();
  const k = await store.getKey('k1');
  expect(k).toMatchObject({
    id: 'k1',
    name: 'old key',
    allowed_models: ['gpt-4o*'],
    rate_limit_rpm: 60,
    budget_usd: 5,
    budget_period: 'day',
    budget_mode: 'soft',
    rate_limit_tpm: null,
    max_concurrent: null,
    rate_limit_scope: 'billable',
  });
  const { seq } = await store.keyChangesSince(0);
  await store.setKeyLimits('k1', { ...k!, budget_mode: 'hard', max_concurrent: 2 });
  expect((await store.keyChangesSince(seq)).keyIds).toEqual(['k1']);
  expect(await store.getKey('k1')).toMatchObject({ budget_mode: 'hard', max_concurrent: 2, budget_usd: 5 });
}

describe('config migration 4 keeps existing keys', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keyrelay.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_MIGRATIONS.filter((m) => m.version <= 3),
    );
    db.exec(ACCOUNT);
    db.exec(`INSERT INTO keys (id, account_id, name, hash, hint, created_at, allowed_models, rate_limit_rpm,
      budget_usd, budget_period) VALUES ('k1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}', '["gpt-4o*"]', 60, 5, 'day')`);
    db.close();
    const store = new SqliteConfigStore(path);
    cleanups.push(() => store.close());
    await expectUpgraded(store);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'config',
      PG_MIGRATIONS.filter((m) => m.version <= 3),
    );
    await pool.query(ACCOUNT);
    await pool.query(`INSERT INTO keys (id, account_id, name, hash, hint, created_at, allowed_models, rate_limit_rpm,
      budget_usd, budget_period) VALUES ('k1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}', '{gpt-4o*}', 60, 5, 'day')`);
    await pool.end();
    const store = new PgConfigStore(tdb.url);
    cleanups.push(() => store.close());
    await expectUpgraded(store);
  });
});

describe('log migration 7 (time ranges by id) keeps every row', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const T0 = Date.parse('2026-02-01T00:00:00.000Z');
  const HOUR = 3_600_000;
  // Written as keyrelay wrote rows before migration 7: the id made a moment before created_at.
  const rows = Array.from({ length: 48 }, (_, i) =>
    makeLogRow({
      account_id: i % 2 ? 'a1' : 'a2',
      id: newId(T0 + i * HOUR),
      created_at: new Date(T0 + i * HOUR + 1).toISOString(),
    }),
  );
  const day2: RequestFilter = {
    account_id: 'a1',
    from: new Date(T0 + 24 * HOUR).toISOString(),
    to: new Date(T0 + 48 * HOUR).toISOString(),
  };
  const day2Ids = rows
    .filter((r) => r.account_id === 'a1' && r.created_at >= day2.from! && r.created_at < day2.to!)
    .map((r) => r.id)
    .reverse();

  async function expectKept(log: LogStore, indexes: () => Promise<string[]>): Promise<void> {
    expect(await indexes()).toEqual(expect.arrayContaining(['requests_account_created', 'requests_created']));
    await log.migrate();
    const left = await indexes();
    expect(left).not.toContain('requests_account_created');
    expect(left).not.toContain('requests_created');
    expect(left).not.toContain('requests_key');
    expect(left).toEqual(
      expect.arrayContaining(['requests_account_id', 'requests_key_id', 'requests_with_body']),
    );
    expect(await log.count()).toBe(rows.length);
    expect((await log.listRequests(day2, { limit: 50 })).items.map((r) => r.id)).toEqual(day2Ids);
    expect((await log.usageBreakdown(day2, 'provider'))[0]?.requests).toBe(12);
    // From the 25th row's created_at on, whose id was taken a millisecond before it: 24 rows.
    const spent = await log.spendSince('key-1', rows[24]!.created_at);
    expect(spent).toBeCloseTo(24 * rows[0]!.cost_usd!, 12);
    expect(await log.prune(new Date(T0 + 24 * HOUR).toISOString())).toEqual({ deleted: 24 });
  }

  it('on SQLite, and a time range reads the (account_id, id) index, not the table', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'requests.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_LOG_MIGRATIONS.filter((m) => m.version <= 6),
    );
    const v6 = new SqliteLogStore(path);
    expect(await v6.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
    await v6.close();
    const log = new SqliteLogStore(path);
    cleanups.push(() => log.close());
    const indexes = () =>
      Promise.resolve(
        db
          .prepare<[], { name: string }>(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'requests'",
          )
          .all()
          .map((r) => r.name),
      );
    await expectKept(log, indexes);

    const params: (string | number)[] = [];
    const where = buildWhere(day2, {
      bind: (v) => (params.push(v), '?'),
      propertyEquals: () => 'TRUE',
      search: () => 'TRUE',
    });
    const plan = db
      .prepare<unknown[], { detail: string }>(
        `EXPLAIN QUERY PLAN SELECT ${SUMMARY_COLUMNS.join(', ')} FROM requests WHERE ${where} ORDER BY id DESC`,
      )
      .all(...params)
      .map((r) => r.detail);
    expect(plan).toEqual([
      'SEARCH requests USING INDEX requests_account_id (account_id=? AND id>? AND id<?)',
    ]);
    // A budget's spend reads its period through (key_id, id), not the key's whole history.
    const spendPlan = db
      .prepare<[], { detail: string }>(
        'EXPLAIN QUERY PLAN SELECT COALESCE(SUM(cost_usd), 0) AS s FROM requests ' +
          "WHERE key_id = 'k' AND id >= 'X' AND created_at >= 'Y'",
      )
      .all()
      .map((r) => r.detail);
    expect(spendPlan).toEqual(['SEARCH requests USING INDEX requests_key_id (key_id=? AND id>?)']);
    db.close();
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    cleanups.push(() => pool.end());
    await runPgMigrations(
      pool,
      'log',
      PG_LOG_MIGRATIONS.filter((m) => m.version <= 6),
    );
    const log = new PgLogStore(tdb.url);
    cleanups.push(() => log.close());
    expect(await log.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
    const indexes = async () =>
      (
        await pool.query<{ indexname: string }>(
          "SELECT indexname FROM pg_indexes WHERE tablename = 'requests' ORDER BY indexname",
        )
      ).rows.map((r) => r.indexname);
    await expectKept(log, indexes);
  });
});

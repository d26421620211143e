/**
 * Upgrading a database from the schema before hard budgets (config migration 3) keeps every key and its
 * limits, on SQLite and on PostgreSQL: existing budgets stay soft, rpm counts billable calls, the new limits
 * start unset, and a change to a new column still reaches the key change feed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runPgMigrations } from '../src/store/postgres/db.js';
import { CONFIG_MIGRATIONS as PG_MIGRATIONS, PgConfigStore } from '../src/store/postgres/config-store.js';
import {
  CONFIG_MIGRATIONS as SQLITE_MIGRATIONS,
  SqliteConfigStore,
} from '../src/store/sqlite/config-store.js';
import { openSqlite, runSqliteMigrations } from '../src/store/sqlite/db.js';
import type { ConfigStore } from '../src/store/types.js';
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

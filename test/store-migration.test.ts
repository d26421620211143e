/**
 * Upgrading a database from the schema before hard budgets (config migration 3) keeps every key and its
 * limits, on SQLite and on PostgreSQL: existing budgets stay soft, rpm counts billable calls, the new limits
 * start unset, unpriced calls under a hard budget stay refused (config migration 13), and a change to a new
 * column still reaches the key change feed. Log migration 7 (time ranges
 * by id, two indexes dropped) keeps every row, and the console's time ranges still find them through an
 * index. Log migration 9 (batches by account) keeps every batch under the account that showed it.
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
import { openSqlite, runSqliteMigrations, type Db } from '../src/store/sqlite/db.js';
import { LOG_MIGRATIONS as SQLITE_LOG_MIGRATIONS } from '../src/store/sqlite/log-schema.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { applyLogSearch, DEFAULT_LOG_SEARCH, INDEX_NEW_ROWS_SQL } from '../src/store/sqlite/log-search.js';
import type { RequestLogRow } from '../src/types.js';
import { newId } from '../src/ids.js';
import { buildWhere, SUMMARY_COLUMNS } from '../src/store/log-query.js';
import type { ConfigStore, LogStore, RequestFilter } from '../src/store/types.js';
import { insertsBeforeOrgs, makeLogRow } from './helpers/log-rows.js';
import { createTestDatabase, testPool } from './helpers/pg.js';
import { expectSameReads, seededRows } from './helpers/rollup-contract.js';

const NOW = '2026-01-02T03:04:05.000Z';

/**
 * Today's store writes every column; an older schema lacks those added since (log migration 11 on). They
 * exist only while it writes the old rows, then are dropped again, so the schema is the old one.
 */
const LATER_COLUMNS = [
  ['tool_uses', 'TEXT', 'jsonb'],
  ['org_id', 'TEXT', 'text'],
] as const;
async function writeAsOldSchema(
  exec: (sql: string) => unknown,
  dialect: 'sqlite' | 'pg',
  write: () => Promise<unknown>,
): Promise<void> {
  for (const [name, sqlite, pg] of LATER_COLUMNS)
    await exec(`ALTER TABLE requests ADD COLUMN ${name} ${dialect === 'sqlite' ? sqlite : pg}`);
  await write();
  for (const [name] of LATER_COLUMNS) await exec(`ALTER TABLE requests DROP COLUMN ${name}`);
}
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
    // Config migration 13: unpriced calls under a hard budget stay refused, as the instance's default was.
    budget_unpriced: 'refuse',
    // Config migration 12: no caps per end user.
    user_rate_limit_rpm: null,
    user_budget_usd: null,
    user_budget_period: null,
    user_budget_mode: 'soft',
  });
  const { seq } = await store.keyChangesSince(0);
  await store.setKeyLimits('k1', { ...k!, budget_mode: 'hard', max_concurrent: 2 });
  const after = await store.keyChangesSince(seq);
  expect(after.keyIds).toEqual(['k1']);
  expect(await store.getKey('k1')).toMatchObject({ budget_mode: 'hard', max_concurrent: 2, budget_usd: 5 });
  await store.setKeyLimits('k1', { ...k!, budget_mode: 'hard', max_concurrent: 2, budget_unpriced: 'allow' });
  expect((await store.keyChangesSince(after.seq)).keyIds).toEqual(['k1']);
  expect(await store.getKey('k1')).toMatchObject({ budget_unpriced: 'allow' });
  const before = await store.keyChangesSince(0);
  await store.setKeyLimits('k1', { ...k!, user_budget_usd: 1, user_budget_period: 'day' });
  expect((await store.keyChangesSince(before.seq)).keyIds).toEqual(['k1']);
  expect(await store.getKey('k1')).toMatchObject({ user_budget_usd: 1, user_budget_period: 'day' });
}

describe('config migrations 4 and 13 keep existing keys', () => {
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

describe('config migrations 9 and 10 (credential labels, API tokens) keep accounts and keys', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const check = async (store: ConfigStore) => {
    await store.migrate();
    expect(await store.getKey('k1')).toMatchObject({ id: 'k1', name: 'old key', account_id: 'a1' });
    expect(await store.listCredentialLabels('a1')).toEqual([]);
    await store.setCredentialLabel('a1', 'fp-1', 'prod OpenAI key');
    expect((await store.listCredentialLabels('a1')).map((l) => l.label)).toEqual(['prod OpenAI key']);
    await store.createApiToken({
      id: 't1',
      account_id: 'a1',
      name: 'bi',
      hint: 'krt_…',
      scopes: ['usage'],
      created_at: NOW,
      hash: 'th1',
    });
    expect((await store.listApiTokens('a1')).map((t) => t.name)).toEqual(['bi']);
  };

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keyrelay.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_MIGRATIONS.filter((m) => m.version <= 4),
    );
    db.exec(ACCOUNT);
    db.exec(
      `INSERT INTO keys (id, account_id, name, hash, hint, created_at) VALUES ('k1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}')`,
    );
    db.close();
    const store = new SqliteConfigStore(path);
    cleanups.push(() => store.close());
    await check(store);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'config',
      PG_MIGRATIONS.filter((m) => m.version <= 4),
    );
    await pool.query(ACCOUNT);
    await pool.query(
      `INSERT INTO keys (id, account_id, name, hash, hint, created_at) VALUES ('k1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}')`,
    );
    await pool.end();
    const store = new PgConfigStore(tdb.url);
    cleanups.push(() => store.close());
    await check(store);
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
    await writeAsOldSchema(
      (sql) => db.exec(sql),
      'sqlite',
      async () => {
        expect(await v6.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
        await v6.close();
      },
    );
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
      propertyPresent: () => 'TRUE',
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
    await writeAsOldSchema(
      (sql) => pool.query(sql),
      'pg',
      async () => expect(await log.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 }),
    );
    const indexes = async () =>
      (
        await pool.query<{ indexname: string }>(
          "SELECT indexname FROM pg_indexes WHERE tablename = 'requests' ORDER BY indexname",
        )
      ).rows.map((r) => r.indexname);
    await expectKept(log, indexes);
  });
});

describe('log migration 9 (batches by account) keeps every batch, under the account that showed it', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const at = '2026-02-01T00:00:00.000Z';
  // Two batches as keyrelay recorded them before migration 9: one with its results counted.
  const OLD_BATCHES = `INSERT INTO batches (provider, batch_id, key_id, account_id, created_at, updated_at,
      created_here, status, request_counts, output_file_id, results_cost_usd, results_succeeded,
      results_unpriced, results_broken, results_request_id, results_fetched_at) VALUES
    ('openai', 'batch_old', 'key-a', 'acct-a', '${at}', '${at}', TRUE, 'completed', '{"total":2}',
      'file-out-old', 0.25, 2, 0, 0, 'req-a', '${at}'),
    ('anthropic', 'msgbatch_old', 'key-a', 'acct-a', '${at}', '${at}', TRUE, 'ended', '{}',
      NULL, NULL, NULL, NULL, NULL, NULL, NULL)`;
  const claim = {
    provider: 'openai' as const,
    batch_id: 'batch_old',
    key_id: 'key-a',
    account_id: 'acct-a',
    at,
    request_id: 'req-a',
    cost_usd: 0.25,
    succeeded: 2,
    unpriced: 0,
    broken: 0,
  };

  async function expectKept(log: LogStore): Promise<void> {
    await log.migrate();
    const kept = await log.listBatches('acct-a', 10);
    expect(kept.map((b) => [b.provider, b.batch_id, b.key_id, b.results_request_id])).toEqual([
      ['anthropic', 'msgbatch_old', 'key-a', null],
      ['openai', 'batch_old', 'key-a', 'req-a'],
    ]);
    expect(kept[1]).toMatchObject({
      results_cost_usd: 0.25,
      created_here: true,
      request_counts: { total: 2 },
    });
    expect(await log.batchByOutputFile('acct-a', 'openai', 'file-out-old')).toMatchObject({
      key_id: 'key-a',
    });
    // Another account now has its own entry for the same batch, and its own first download.
    expect(
      await log.claimBatchResults({ ...claim, key_id: 'key-b', account_id: 'acct-b', request_id: 'req-b' }),
    ).toBe(true);
    expect(await log.claimBatchResults({ ...claim, request_id: 'req-a2' })).toBe(false);
    expect((await log.listBatches('acct-b', 10)).map((b) => b.results_request_id)).toEqual(['req-b']);
  }

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'requests.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_LOG_MIGRATIONS.filter((m) => m.version <= 8),
    );
    db.exec(OLD_BATCHES.replaceAll('TRUE', '1'));
    db.close();
    const log = new SqliteLogStore(path);
    cleanups.push(() => log.close());
    await expectKept(log);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    cleanups.push(() => pool.end());
    await runPgMigrations(
      pool,
      'log',
      PG_LOG_MIGRATIONS.filter((m) => m.version <= 8),
    );
    await pool.query(OLD_BATCHES);
    const log = new PgLogStore(tdb.url);
    cleanups.push(() => log.close());
    await expectKept(log);
  });
});

describe('log migration 10 (the provider list is the registry’s) keeps every row', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const T0 = Date.parse('2026-02-01T00:00:00.000Z');
  const rows = Array.from({ length: 20 }, (_, i) =>
    makeLogRow({
      at: T0 + i * 1000,
      provider: i % 2 ? 'openai' : 'anthropic',
      request_body: `{"prompt":"row${i} marmalade"}`,
    }),
  );
  const BATCH = `INSERT INTO batches (provider, batch_id, key_id, account_id, created_at, updated_at, created_here,
    request_counts) VALUES ('anthropic', 'msgbatch_1', 'key-1', 'acct-1', '${NOW}', '${NOW}', TRUE, '{"succeeded":2}')`;
  // Not in the old CHECKs: after the migration the tables take a provider the registry may add.
  const NEW_PROVIDER = [
    `UPDATE requests SET provider = 'mistral' WHERE id = '${rows[0]!.id}'`,
    "UPDATE batches SET provider = 'mistral' WHERE batch_id = 'msgbatch_1'",
  ];

  async function expectKept(log: LogStore): Promise<void> {
    expect(await log.count()).toBe(rows.length);
    const all = await log.listRequests({ account_id: rows[0]!.account_id }, { limit: 50 });
    expect(all.items.map((r) => r.id)).toEqual(rows.map((r) => r.id).reverse());
    const found = await log.listRequests({ account_id: rows[0]!.account_id, search: 'row7' }, { limit: 50 });
    expect(found.items.map((r) => r.id)).toEqual([rows[7]!.id]);
    expect((await log.getRequest(rows[3]!.account_id, rows[3]!.id))?.provider).toBe('openai');
    const byProvider = await log.usageBreakdown({ account_id: rows[0]!.account_id }, 'provider');
    expect(byProvider.map((b) => [b.group, b.requests]).sort()).toEqual([
      ['anthropic', 10],
      ['openai', 10],
    ]);
    // The rows' organization (migration 13) and session (18's index) read as one session.
    const org = { org_id: rows[0]!.account_id };
    expect((await log.listSessions(org, { limit: 5 })).items.map((x) => [x.session, x.requests])).toEqual([
      ['sess-7', 20],
    ]);
    expect((await log.sessionCalls(org, 'sess-7', { limit: 50 })).items.map((r) => r.id)).toEqual(
      rows.map((r) => r.id),
    );
  }

  it('on SQLite, with its indexes and search triggers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'requests.db');
    const db = openSqlite(path);
    cleanups.push(() => db.close());
    runSqliteMigrations(
      db,
      SQLITE_LOG_MIGRATIONS.filter((m) => m.version <= 9),
    );
    applyLogSearch(db, DEFAULT_LOG_SEARCH); // as every start of a version-9 keyrelay left it
    const v9 = new SqliteLogStore(path);
    await writeAsOldSchema(
      (sql) => db.exec(sql),
      'sqlite',
      async () => {
        expect(await v9.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
        await v9.close();
      },
    );
    db.exec(BATCH);
    for (const sql of NEW_PROVIDER) expect(() => db.exec(sql)).toThrow(/CHECK/);
    const schema = () =>
      db
        .prepare<[], { type: string; name: string; sql: string | null }>(
          'SELECT type, name, sql FROM sqlite_master ORDER BY name',
        )
        .all();
    const before = schema();
    expect(before.filter((r) => r.type === 'trigger' || r.type === 'view')).toHaveLength(3);

    const log = new SqliteLogStore(path);
    cleanups.push(() => log.close());
    await log.migrate();
    // requests_key_end_user is log migration 12's, requests_org_id 13's (below), the sort indexes 14's,
    // requests_org_session 15's (replaced by 18's requests_org_session_page), requests_org_end_user 16's,
    // the usage rollup's tables 19's.
    const later = [
      'requests',
      'usage_daily',
      'usage_daily_account',
      'usage_daily_state',
      'sqlite_autoindex_usage_daily_1',
      'batches',
      'requests_key_end_user',
      'requests_org_id',
      'requests_org_cost',
      'requests_org_tokens',
      'requests_org_latency',
      'requests_org_end_user',
      'requests_org_session',
      'requests_org_session_page',
    ];
    const unchanged = (r: { name: string }) => !later.includes(r.name);
    expect(schema().filter(unchanged)).toEqual(before.filter(unchanged));
    await expectKept(log);
    expect(db.prepare('SELECT provider, batch_id, request_counts FROM batches').all()).toEqual([
      { provider: 'anthropic', batch_id: 'msgbatch_1', request_counts: '{"succeeded":2}' },
    ]);
    expect(db.prepare('PRAGMA integrity_check').all()).toEqual([{ integrity_check: 'ok' }]);
    for (const sql of NEW_PROVIDER) db.exec(sql);
    // A row written after the migration is still found by search (the triggers are back).
    expect(await log.insertBatch([makeLogRow({ at: T0 + 60_000, request_body: 'quince' })])).toEqual({
      inserted: 1,
      rejected: 0,
    });
    const quince = await log.listRequests(
      { account_id: rows[0]!.account_id, search: 'quince' },
      { limit: 5 },
    );
    expect(quince.items).toHaveLength(1);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    cleanups.push(() => pool.end());
    await runPgMigrations(
      pool,
      'log',
      PG_LOG_MIGRATIONS.filter((m) => m.version <= 9),
    );
    const log = new PgLogStore(tdb.url);
    cleanups.push(() => log.close());
    await writeAsOldSchema(
      (sql) => pool.query(sql),
      'pg',
      async () => expect(await log.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 }),
    );
    await pool.query(BATCH);
    for (const sql of NEW_PROVIDER) await expect(pool.query(sql)).rejects.toThrow(/check constraint/);
    await log.migrate();
    await expectKept(log);
    const batches = await pool.query('SELECT provider, batch_id, request_counts FROM batches');
    expect(batches.rows).toEqual([
      { provider: 'anthropic', batch_id: 'msgbatch_1', request_counts: { succeeded: 2 } },
    ]);
    for (const sql of NEW_PROVIDER) await pool.query(sql);
  });
});

describe('log migration 11 (tool uses per row) keeps every row', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const T0 = Date.parse('2026-03-01T00:00:00.000Z');
  const rows = Array.from({ length: 6 }, (_, i) => makeLogRow({ at: T0 + i * 1000 }));
  const withTools = makeLogRow({
    at: T0 + 60_000,
    tool_uses: { web_searches: 3, code_interpreter_containers: 1 },
    price_source: 'partial: genai-prices@0.1.8 has no price for code_interpreter_containers ×1 on gpt-4o',
  });

  async function expectKept(log: LogStore): Promise<void> {
    await log.migrate();
    expect(await log.count()).toBe(rows.length);
    const old = await log.getRequest(rows[2]!.account_id, rows[2]!.id);
    expect(old?.tool_uses).toBeNull();
    expect(old?.cost_usd).toBe(rows[2]!.cost_usd);
    expect(await log.insertBatch([withTools])).toEqual({ inserted: 1, rejected: 0 });
    const back = await log.getRequest(withTools.account_id, withTools.id);
    expect(back?.tool_uses).toEqual({ web_searches: 3, code_interpreter_containers: 1 });
    const listed = await log.listRequests({ account_id: withTools.account_id }, { limit: 1 });
    expect(listed.items[0]?.tool_uses).toEqual({ web_searches: 3, code_interpreter_containers: 1 });
  }

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'requests.db');
    const db = openSqlite(path);
    cleanups.push(() => db.close());
    runSqliteMigrations(
      db,
      SQLITE_LOG_MIGRATIONS.filter((m) => m.version <= 10),
    );
    applyLogSearch(db, DEFAULT_LOG_SEARCH);
    const v10 = new SqliteLogStore(path);
    await writeAsOldSchema(
      (sql) => db.exec(sql),
      'sqlite',
      async () => {
        expect(await v10.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
        await v10.close();
      },
    );
    const log = new SqliteLogStore(path);
    cleanups.push(() => log.close());
    await expectKept(log);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    cleanups.push(() => pool.end());
    await runPgMigrations(
      pool,
      'log',
      PG_LOG_MIGRATIONS.filter((m) => m.version <= 10),
    );
    const log = new PgLogStore(tdb.url);
    cleanups.push(() => log.close());
    await writeAsOldSchema(
      (sql) => pool.query(sql),
      'pg',
      async () => expect(await log.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 }),
    );
    await expectKept(log);
  });
});

/** Rows written by a keyrelay before organizations into a SQLite log, indexed for search as it did (an insert trigger, later the store). */
function insertBeforeOrgs(db: Db, rows: readonly RequestLogRow[]): void {
  const before = db.prepare<[], { n: number | null }>('SELECT max(rowid) AS n FROM requests').get()!.n ?? 0;
  for (const { sql, values } of insertsBeforeOrgs(rows, 'sqlite')) db.prepare(sql).run(...values);
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'requests_fts_source'").get()) {
    db.prepare(INDEX_NEW_ROWS_SQL).run(before);
  }
}

describe('config migration 5 and log migration 13 (organizations) keep every account, key and row', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const KEYS = `INSERT INTO keys (id, account_id, name, hash, hint, created_at, rate_limit_rpm) VALUES
    ('k1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}', 60), ('k2', 'a2', 'other', 'h2', 'kr_…', '${NOW}', NULL)`;
  const SECOND = `INSERT INTO accounts (id, email, password_hash, password_changed_at, created_at)
    VALUES ('a2', 'second@example.com', 'x', '${NOW}', '${NOW}')`;
  const T0 = Date.parse('2026-02-01T00:00:00.000Z');
  const rows = Array.from({ length: 10 }, (_, i) =>
    makeLogRow({
      at: T0 + i * 1000,
      account_id: i % 2 ? 'a1' : 'a2',
      key_id: i % 2 ? 'k1' : 'k2',
      request_body: `{"prompt":"row${i} kumquat"}`,
    }),
  );

  async function expectOrganized(
    cfg: ConfigStore,
    log: LogStore,
    raw: (sql: string) => Promise<unknown>,
  ): Promise<void> {
    await cfg.migrate();
    await log.migrate();
    // Every account owns its personal organization, under its own id, named by its email.
    expect(await cfg.listOrgsOf('a1')).toEqual([
      { id: 'a1', name: 'old@example.com', personal_of: 'a1', created_at: NOW, role: 'owner' },
    ]);
    expect((await cfg.listMembers('a2')).map((m) => [m.account_id, m.email, m.role])).toEqual([
      ['a2', 'second@example.com', 'owner'],
    ]);
    // Keys follow, limits kept; the proxy's lookup by hash sees the organization.
    expect(await cfg.getKeyByHash('h1')).toMatchObject({
      id: 'k1',
      account_id: 'a1',
      org_id: 'a1',
      rate_limit_rpm: 60,
      // Config migration 17: every existing key is a member's, none a service key.
      service: false,
    });
    expect((await cfg.listOrgKeys('a2')).map((k) => k.id)).toEqual(['k2']);
    // A transfer (a change of holder) reaches the key change feed like any other key change.
    const { seq } = await cfg.keyChangesSince(0);
    const org = await cfg.createOrg({ id: 'o1', name: 'Team', owner_id: 'a1' });
    expect(org).toMatchObject({ id: 'o1', personal_of: null });
    await cfg.setMember('a1', 'a2', 'member');
    expect(await cfg.transferKeys('a1', 'a1', 'a2')).toEqual(['k1']);
    expect((await cfg.keyChangesSince(seq)).keyIds).toEqual(['k1']);
    // So does making a key a service key (config migration 17's trigger covers the column), even by hand.
    const { seq: before } = await cfg.keyChangesSince(seq);
    await raw("UPDATE keys SET service = NOT service WHERE id = 'k2'");
    expect((await cfg.keyChangesSince(before)).keyIds).toEqual(['k2']);
    expect((await cfg.getKey('k2'))?.service).toBe(true);
    // Rows follow their account into its personal organization, found by organization and by search.
    expect(await log.count()).toBe(rows.length);
    const a1Rows = rows
      .filter((r) => r.account_id === 'a1')
      .map((r) => r.id)
      .reverse();
    expect((await log.listRequests({ org_id: 'a1' }, { limit: 50 })).items.map((r) => r.id)).toEqual(a1Rows);
    const found = await log.listRequests({ org_id: 'a1', search: 'row3' }, { limit: 50 });
    expect(found.items.map((r) => r.id)).toEqual([rows[3]!.id]);
    expect((await log.getRequest({ org_id: 'a2' }, rows[0]!.id))?.org_id).toBe('a2');
    expect(await log.getRequest({ org_id: 'a2' }, rows[1]!.id)).toBeNull();
    // An account made after the migration gets its personal organization with it.
    await cfg.createAccount({ id: 'a3', email: 'new@example.com', password_hash: 'x' });
    expect((await cfg.listOrgsOf('a3')).map((o) => [o.id, o.role])).toEqual([['a3', 'owner']]);
    // The audit log (config migration 6) takes entries and refuses to change or lose one.
    const entry = {
      id: 'e1',
      org_id: 'a1',
      at: NOW,
      actor_id: 'a1',
      actor_email: 'old@example.com',
      action: 'key.rename',
      target: 'k1',
      ip: '10.0.0.1',
      user_agent: 'ua',
      before: { name: 'old key' },
      after: { name: 'new name' },
    };
    await cfg.appendAudit(entry);
    expect(await cfg.listAudit({ org_id: 'a1', limit: 10 })).toEqual([entry]);
    expect(await cfg.listAudit({ org_id: 'a2', limit: 10 })).toEqual([]);
    await expect(raw("UPDATE audit_log SET action = 'x'")).rejects.toThrow(/append-only/);
    await expect(raw('DELETE FROM audit_log')).rejects.toThrow(/append-only/);
    expect(await cfg.listAudit({ org_id: 'a1', action: 'key.rename', limit: 10 })).toHaveLength(1);
    // Config migration 11: an organization keeps its entries until it sets a retention; another's setting,
    // or one longer than the entry's age, still refuses its deletion; past it, the entry may go.
    expect(await cfg.getAuditRetention('a1')).toBeNull();
    await cfg.setAuditRetention('a2', 1);
    await expect(raw('DELETE FROM audit_log')).rejects.toThrow(/append-only/);
    await cfg.setAuditRetention('a1', 3650);
    await expect(raw('DELETE FROM audit_log')).rejects.toThrow(/append-only/);
    await cfg.setAuditRetention('a1', 1);
    await expect(raw("UPDATE audit_log SET action = 'x'")).rejects.toThrow(/append-only/);
    await raw('DELETE FROM audit_log');
    expect(await cfg.listAudit({ org_id: 'a1', limit: 10 })).toEqual([]);
  }

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const db = openSqlite(join(dir, 'keyrelay.db'));
    runSqliteMigrations(
      db,
      SQLITE_MIGRATIONS.filter((m) => m.version <= 4),
    );
    for (const sql of [ACCOUNT, SECOND, KEYS]) db.exec(sql);
    db.close();
    const logDb = openSqlite(join(dir, 'requests.db'));
    runSqliteMigrations(
      logDb,
      SQLITE_LOG_MIGRATIONS.filter((m) => m.version <= 10),
    );
    applyLogSearch(logDb, DEFAULT_LOG_SEARCH);
    insertBeforeOrgs(logDb, rows);
    logDb.close();
    const cfg = new SqliteConfigStore(join(dir, 'keyrelay.db'));
    const log = new SqliteLogStore(join(dir, 'requests.db'));
    cleanups.push(
      () => cfg.close(),
      () => log.close(),
    );
    const rawDb = openSqlite(join(dir, 'keyrelay.db'));
    cleanups.push(() => rawDb.close());
    await expectOrganized(cfg, log, (sql) => Promise.resolve().then(() => rawDb.exec(sql)));
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'config',
      PG_MIGRATIONS.filter((m) => m.version <= 4),
    );
    await runPgMigrations(
      pool,
      'log',
      PG_LOG_MIGRATIONS.filter((m) => m.version <= 10),
    );
    for (const sql of [ACCOUNT, SECOND, KEYS]) await pool.query(sql);
    for (const { sql, values } of insertsBeforeOrgs(rows, 'pg')) await pool.query(sql, values);
    await pool.end();
    const cfg = new PgConfigStore(tdb.url);
    const log = new PgLogStore(tdb.url);
    cleanups.push(
      () => cfg.close(),
      () => log.close(),
    );
    const rawPool = testPool(tdb.url, 1);
    cleanups.push(() => rawPool.end());
    await expectOrganized(cfg, log, (sql) => rawPool.query(sql));
  });
});

describe('config migration 12 (caps per end user) after 13, as on a database deployed before it', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const check = async (store: ConfigStore) => {
    await store.migrate();
    const k = await store.getKey('k1');
    expect(k).toMatchObject({ user_rate_limit_rpm: null, user_budget_usd: null, user_budget_mode: 'soft' });
    // The trigger 13 made is remade with the new columns: a changed cap reaches the key change feed.
    for (const patch of [
      { user_rate_limit_rpm: 3 },
      { user_budget_usd: 2, user_budget_period: 'day' as const },
      { user_budget_mode: 'hard' as const },
      { budget_unpriced: 'allow' as const },
    ]) {
      const { seq } = await store.keyChangesSince(0);
      await store.setKeyLimits('k1', { ...(await store.getKey('k1'))!, ...patch });
      expect((await store.keyChangesSince(seq)).keyIds).toEqual(['k1']);
    }
    expect(await store.getKey('k1')).toMatchObject({ user_rate_limit_rpm: 3, user_budget_usd: 2 });
  };
  const ORG = `INSERT INTO orgs (id, name, personal_of, created_at) VALUES ('a1', 'personal', 'a1', '${NOW}')`;
  const KEY = `INSERT INTO keys (id, account_id, org_id, name, hash, hint, created_at)
    VALUES ('k1', 'a1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}')`;
  // Migration 13 as such a database ran it: its trigger names none of migration 12's columns.
  const OLD_TRIGGER_COLUMNS = `name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm,
    budget_usd, budget_period, budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope, account_id, org_id,
    budget_unpriced`;
  const OLD_13_SQLITE = `
    ALTER TABLE keys ADD COLUMN budget_unpriced TEXT NOT NULL DEFAULT 'refuse' CHECK (budget_unpriced IN ('refuse', 'allow'));
    DROP TRIGGER keys_changed;
    CREATE TRIGGER keys_changed AFTER UPDATE OF ${OLD_TRIGGER_COLUMNS} ON keys FOR EACH ROW BEGIN
      INSERT INTO key_changes (key_id) VALUES (NEW.id);
    END;`;
  const OLD_13_PG = `
    ALTER TABLE keys
      ADD COLUMN budget_unpriced text NOT NULL DEFAULT 'refuse' CHECK (budget_unpriced IN ('refuse', 'allow'));
    DROP TRIGGER keys_changed ON keys;
    CREATE TRIGGER keys_changed AFTER UPDATE OF ${OLD_TRIGGER_COLUMNS} OR DELETE
    ON keys FOR EACH ROW EXECUTE FUNCTION keyrelay_record_key_change();`;

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keyrelay.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_MIGRATIONS.filter((m) => m.version !== 12).map((m) =>
        m.version === 13 ? { ...m, sql: OLD_13_SQLITE } : m,
      ),
    );
    db.exec(ACCOUNT);
    db.exec(ORG);
    db.exec(KEY);
    db.close();
    const store = new SqliteConfigStore(path);
    cleanups.push(() => store.close());
    await check(store);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'config',
      PG_MIGRATIONS.filter((m) => m.version !== 12).map((m) =>
        m.version === 13 ? { ...m, sql: OLD_13_PG } : m,
      ),
    );
    await pool.query(ACCOUNT);
    await pool.query(ORG);
    await pool.query(KEY);
    await pool.end();
    const store = new PgConfigStore(tdb.url);
    cleanups.push(() => store.close());
    await check(store);
  });
});

describe('config migration 18 (limits per member) keeps every membership and key', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const SEED = [
    ACCOUNT,
    `INSERT INTO orgs (id, name, personal_of, created_at) VALUES ('a1', 'old@example.com', 'a1', '${NOW}')`,
    `INSERT INTO memberships (org_id, account_id, role, created_at) VALUES ('a1', 'a1', 'owner', '${NOW}')`,
    `INSERT INTO keys (id, account_id, org_id, name, hash, hint, created_at) VALUES ('k1', 'a1', 'a1', 'old key', 'h1', 'kr_…', '${NOW}')`,
  ];
  const check = async (store: ConfigStore) => {
    await store.migrate();
    expect((await store.listMembers('a1')).map((m) => [m.account_id, m.role, m.limits])).toEqual([
      ['a1', 'owner', { rate_limit_rpm: null, budget_usd: null, budget_period: null, budget_mode: 'soft' }],
    ]);
    expect(await store.getKeyByHash('h1')).toMatchObject({ id: 'k1', name: 'old key', member_limits: null });
    const limits = {
      rate_limit_rpm: 10,
      budget_usd: 3,
      budget_period: 'month',
      budget_mode: 'hard',
    } as const;
    const head = await store.keyChangeHead();
    expect(await store.setMemberLimits('a1', 'a1', limits)).toEqual(limits);
    expect((await store.getKeyByHash('h1'))?.member_limits).toEqual(limits);
    expect((await store.keyChangesSince(head)).keyIds).toEqual(['k1']);
  };

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keyrelay.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_MIGRATIONS.filter((m) => m.version <= 17),
    );
    for (const sql of SEED) db.exec(sql);
    db.close();
    const store = new SqliteConfigStore(path);
    cleanups.push(() => store.close());
    await check(store);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'config',
      PG_MIGRATIONS.filter((m) => m.version <= 17),
    );
    for (const sql of SEED) await pool.query(sql);
    await pool.end();
    const store = new PgConfigStore(tdb.url);
    cleanups.push(() => store.close());
    await check(store);
  });
});

describe('config migration 20 keeps every delivery and session; a pending delivery is taken over, a session is of unknown method', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const OLD_ROWS = [
    ACCOUNT,
    `INSERT INTO orgs (id, name, created_at) VALUES ('o1', 'old org', '${NOW}')`,
    `INSERT INTO alert_rules (id, org_id, name, scope, kind, params, url, format, secret, created_at, created_by)
     VALUES ('r1', 'o1', 'budget', 'org', 'budget', '{"budget_usd":1,"period":"day","thresholds":[50]}',
       'https://hooks.example.com/x', 'json', 'whsec_x', '${NOW}', 'a1')`,
    `INSERT INTO sessions (id_hash, account_id, created_at, last_seen_at, expires_at)
     VALUES ('s1', 'a1', '${NOW}', '${NOW}', '2099-01-01T00:00:00.000Z')`,
    ...['pending', 'delivered'].map(
      (state, i) => `INSERT INTO alert_deliveries
         (id, rule_id, org_id, dedupe_key, payload, state, attempts, created_at, updated_at)
         VALUES ('d${i}', 'r1', 'o1', 'k${i}', '{}', '${state}', 1, '${NOW}', '${NOW}')`,
    ),
  ];
  const check = async (store: ConfigStore) => {
    await store.migrate();
    expect((await store.listAlertDeliveries('o1', 10)).map((d) => [d.id, d.state])).toEqual([
      ['d1', 'delivered'],
      ['d0', 'pending'],
    ]);
    const taken = await store.takeOverAlertDeliveries(new Date().toISOString(), new Date().toISOString(), 10);
    expect(taken.map((d) => [d.id, d.attempts])).toEqual([['d0', 1]]);
    expect(await store.getSession('s1')).toMatchObject({ account_id: 'a1', via: null });
  };

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keyrelay.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_MIGRATIONS.filter((m) => m.version < 20),
    );
    for (const sql of OLD_ROWS) db.exec(sql);
    db.close();
    const store = new SqliteConfigStore(path);
    cleanups.push(() => store.close());
    await check(store);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'config',
      PG_MIGRATIONS.filter((m) => m.version < 20),
    );
    for (const sql of OLD_ROWS) await pool.query(sql);
    await pool.end();
    const store = new PgConfigStore(tdb.url);
    cleanups.push(() => store.close());
    await check(store);
  });
});

describe('log migration 19 (daily usage rollup) keeps every read equal while the fill adds the rows before it', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const org = 'org-rollup';
  const rows = seededRows(org, ['a1', 'a2'], 400);

  /** `rolled` and `exact` on the migrated database: the rollup whatever the size, and the rows alone. */
  async function check(rolled: LogStore, exact: LogStore): Promise<void> {
    await rolled.migrate();
    // Nothing of the rows written before is in the rollup yet: every read is the rows'.
    await expectSameReads(rolled, exact, { org_id: org });
    let days = 0;
    while (await rolled.fillUsageRollup()) days++;
    expect(days).toBe(5);
    await expectSameReads(rolled, exact, { org_id: org });
    const f = { org_id: org, from: '2026-05-11T00:00:00.000Z', to: '2026-05-13T00:00:00.000Z' };
    const approx = await rolled.usageBreakdown(f, 'model');
    // From the rollup: a bucket's middle, not the rows' exact percentile.
    expect(approx.map((r) => r.latency_p95_ms)).not.toEqual(
      (await exact.usageBreakdown(f, 'model')).map((r) => r.latency_p95_ms),
    );
  }

  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-migrate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'requests.db');
    const db = openSqlite(path);
    runSqliteMigrations(
      db,
      SQLITE_LOG_MIGRATIONS.filter((m) => m.version <= 18),
    );
    db.close();
    const v18 = new SqliteLogStore(path);
    expect(await v18.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
    await v18.close();
    const rolled = new SqliteLogStore(path, { rollupMinRows: 0 });
    const exact = new SqliteLogStore(path, { rollupMinRows: Infinity });
    cleanups.push(
      () => rolled.close(),
      () => exact.close(),
    );
    await check(rolled, exact);
  });

  it('on PostgreSQL', async () => {
    const tdb = await createTestDatabase();
    cleanups.push(() => tdb.drop());
    const pool = testPool(tdb.url, 1);
    await runPgMigrations(
      pool,
      'log',
      PG_LOG_MIGRATIONS.filter((m) => m.version <= 18),
    );
    await pool.end();
    const rolled = new PgLogStore(tdb.url, { rollupMinRows: 0 });
    const exact = new PgLogStore(tdb.url, { rollupMinRows: Infinity });
    cleanups.push(
      () => rolled.close(),
      () => exact.close(),
    );
    expect(await rolled.insertBatch(rows)).toEqual({ inserted: rows.length, rejected: 0 });
    await check(rolled, exact);
  });
});

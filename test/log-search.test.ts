/**
 * KEYRELAY_LOG_SEARCH and KEYRELAY_LOG_SEARCH_BODY_CHARS on both stores: search holds to the contract without
 * the full-text index (a bounded scan), switching the index off and on keeps every row and finds the old
 * ones again, and the body limit decides which words of a long body the index holds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.js';
import { openStores } from '../src/store/factory.js';
import { runPgMigrations } from '../src/store/postgres/db.js';
import { applyPgLogSearch, hasSearchColumn } from '../src/store/postgres/log-search.js';
import { LOG_MIGRATIONS as PG_LOG_MIGRATIONS } from '../src/store/postgres/log-schema.js';
import { PgLogStore, type PgLogStoreOptions } from '../src/store/postgres/log-store.js';
import { openSqlite, runSqliteMigrations } from '../src/store/sqlite/db.js';
import { LOG_MIGRATIONS } from '../src/store/sqlite/log-schema.js';
import { applyLogSearch, hasSearchIndex } from '../src/store/sqlite/log-search.js';
import { LOG_COLUMNS } from '../src/store/log-query.js';
import { encodeRows } from '../src/store/sqlite/log-store.js';
import type { RequestLogRow } from '../src/types.js';
import { SqliteLogStore, type SqliteLogStoreOptions } from '../src/store/sqlite/log-store.js';
import type { LogStore } from '../src/store/types.js';
import { describeLogSearchContract } from './helpers/log-contract.js';
import { makeLogRow } from './helpers/log-rows.js';
import { createTestDatabase, testPool } from './helpers/pg.js';

type Options = SqliteLogStoreOptions & PgLogStoreOptions;

interface Backend {
  name: string;
  setup(): Promise<() => Promise<void>>;
  open(opts: Options): LogStore;
  hasIndex(): Promise<boolean>;
}

function sqlite(): Backend {
  let dir = '';
  return {
    name: 'sqlite',
    setup() {
      dir = mkdtempSync(join(tmpdir(), 'keyrelay-search-'));
      return Promise.resolve(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
    },
    open: (opts) => new SqliteLogStore(join(dir, 'requests.db'), opts),
    hasIndex() {
      const db = openSqlite(join(dir, 'requests.db'));
      try {
        return Promise.resolve(hasSearchIndex(db));
      } finally {
        db.close();
      }
    },
  };
}

function postgres(): Backend {
  let url = '';
  return {
    name: 'postgres',
    async setup() {
      const db = await createTestDatabase();
      url = db.url;
      return () => db.drop();
    },
    open: (opts) => new PgLogStore(url, opts),
    async hasIndex() {
      const pool = testPool(url);
      try {
        return await hasSearchColumn(pool);
      } finally {
        await pool.end();
      }
    },
  };
}

const body = (text: string) => JSON.stringify({ messages: [{ role: 'user', content: text }] });
const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

describe.each([sqlite(), postgres()])('request-log search on $name', (backend) => {
  let cleanup: () => Promise<void> = () => Promise.resolve();
  const opened: LogStore[] = [];
  const open = async (opts: Options) => {
    const s = backend.open(opts);
    opened.push(s);
    await s.migrate();
    return s;
  };

  beforeAll(async () => {
    cleanup = await backend.setup();
  });
  afterAll(async () => {
    for (const s of opened) await s.close();
    await cleanup();
  });

  describe('with KEYRELAY_LOG_SEARCH=false: the same contract, by scanning', () => {
    let store: LogStore;
    beforeAll(async () => {
      store = await open({ search: false });
    });
    it('has no full-text index', async () => {
      expect(await backend.hasIndex()).toBe(false);
    });
    describeLogSearchContract({ store: () => store });
  });

  it('switching the index off and on keeps every row, and finds old rows again', async () => {
    const acct = `acct-${newId()}`;
    const find = async (s: LogStore, q: string) =>
      ids((await s.listRequests({ account_id: acct, search: q }, { limit: 50 })).items);
    const t = Date.parse('2026-06-01T00:00:00.000Z');
    const before = makeLogRow({ account_id: acct, at: t, request_body: body('platypus before') });
    const during = makeLogRow({ account_id: acct, at: t + 1, request_body: body('platypus during') });

    const on = await open({ search: true });
    expect(await backend.hasIndex()).toBe(true);
    await on.insertBatch([before]);
    expect(await find(on, 'platypus')).toEqual([before.id]);
    const rows = await on.count();

    const off = await open({ search: false });
    expect(await backend.hasIndex()).toBe(false);
    expect(await off.count()).toBe(rows);
    await off.insertBatch([during]);
    expect(await find(off, 'platypus')).toEqual([during.id, before.id]);
    expect(await find(off, 'before')).toEqual([before.id]);

    const again = await open({ search: true });
    expect(await backend.hasIndex()).toBe(true);
    expect(await again.count()).toBe(rows + 1);
    // Both: the one indexed before, and the one written while there was no index.
    expect(await find(again, 'platypus')).toEqual([during.id, before.id]);
    expect(await find(again, 'during')).toEqual([during.id]);
    // Still in step with deletes: retention removes both, the index forgets them.
    await again.prune(new Date(t + 2).toISOString());
    expect(await find(again, 'platypus')).toEqual([]);
  });

  it('indexes the head and tail of a long body, up to the indexed characters per body, and stays in step', async () => {
    const acct = `acct-${newId()}`;
    const s = await open({ search: true, searchBodyChars: 200 });
    const find = async (q: string) =>
      ids((await s.listRequests({ account_id: acct, search: q }, { limit: 50 })).items);
    const t = Date.parse('2002-03-01T00:00:00.000Z');
    const filler = 'lorem '.repeat(100);
    const long = makeLogRow({
      account_id: acct,
      at: t,
      request_body: body(`aardvark ${filler} meerkat ${filler} narwhal`),
    });
    const short = makeLogRow({ account_id: acct, at: t + 1, request_body: body('meerkat aardvark') });
    await s.insertBatch([long, short]);
    expect(await find('aardvark')).toEqual([short.id, long.id]); // head
    expect(await find('narwhal')).toEqual([long.id]); // tail
    expect(await find('meerkat')).toEqual([short.id]); // the middle of the long body is not indexed
    // Pruning bodies removes exactly what was indexed: nothing of the long body is found afterwards.
    await s.prune('1990-01-01T00:00:00.000Z', [{ account_id: acct, before: new Date(t + 2).toISOString() }]);
    expect(await find('aardvark')).toEqual([]);
    expect(await find('narwhal')).toEqual([]);

    // Without the index, search reads whole bodies.
    const whole = makeLogRow({
      account_id: acct,
      at: t + 3,
      request_body: body(`${filler} meerkat ${filler}`),
    });
    const off = await open({ search: false });
    await off.insertBatch([whole]);
    expect(await find('meerkat')).toEqual([whole.id]);
    await open({ search: true }); // back as the other tests expect
  });

  it('without the index, reads a bounded window per page and lets the console continue from it', async () => {
    const acct = `acct-${newId()}`;
    const s = await open({ search: false, searchScanRows: 5 });
    const t = Date.parse('2026-07-01T00:00:00.000Z');
    const rows = Array.from({ length: 12 }, (_, i) =>
      makeLogRow({ account_id: acct, at: t + i, request_body: body(i % 4 === 0 ? 'ibis' : 'plain') }),
    );
    await s.insertBatch(rows);
    const want = rows
      .filter((_, i) => i % 4 === 0)
      .map((r) => r.id)
      .reverse();
    // The newest 5 rows (11..7) hold one match (8); a cursor leads on to the next window.
    const first = await s.listRequests({ account_id: acct, search: 'ibis' }, { limit: 50 });
    expect(ids(first.items)).toEqual(want.slice(0, 1));
    expect(first.next_cursor).not.toBeNull();
    const all: string[] = ids(first.items);
    let cursor = first.next_cursor;
    while (cursor) {
      const page = await s.listRequests({ account_id: acct, search: 'ibis' }, { limit: 50, cursor });
      all.push(...ids(page.items));
      cursor = page.next_cursor;
    }
    expect(all).toEqual(want);
    // A full page ends where its last match is, as with the index.
    const one = await s.listRequests({ account_id: acct, search: 'ibis' }, { limit: 1 });
    expect(ids(one.items)).toEqual(want.slice(0, 1));
    const next = await s.listRequests(
      { account_id: acct, search: 'ibis' },
      { limit: 1, cursor: one.next_cursor },
    );
    expect(ids(next.items)).toEqual(want.slice(1, 2));
    await open({ search: true });
  });

  it('without the index, a search that fills its page early leaves the reads current', async () => {
    const acct = `acct-${newId()}`;
    const reader = await open({ search: false });
    const writer = await open({ search: false });
    const t = Date.parse('2026-07-02T00:00:00.000Z');
    await writer.insertBatch(
      Array.from({ length: 6 }, (_, i) =>
        makeLogRow({ account_id: acct, at: t + i, request_body: body('heron') }),
      ),
    );
    const page = await reader.listRequests({ account_id: acct, search: 'heron' }, { limit: 2 });
    expect(page.items).toHaveLength(2);
    const later = makeLogRow({ account_id: acct, at: t + 100 });
    await writer.insertBatch([later]);
    // The reader's connection took no snapshot along with the page: the row written since is there.
    expect(await reader.getRequest(acct, later.id)).not.toBeNull();
    expect((await reader.listRequests({ account_id: acct }, { limit: 1 })).items[0]?.id).toBe(later.id);
    await open({ search: true });
  });
});

describe('openStores', () => {
  it('applies KEYRELAY_LOG_SEARCH from the config to the SQLite log', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-search-'));
    const indexed = () => {
      const db = openSqlite(join(dataDir, 'requests.db'));
      try {
        return hasSearchIndex(db);
      } finally {
        db.close();
      }
    };
    try {
      for (const enabled of [false, true]) {
        const stores = await openStores({
          dataDir,
          databaseUrl: null,
          logSearch: { enabled, bodyChars: 8192, scanRows: 10_000 },
        });
        await Promise.all([stores.configStore.close(), stores.logStore.close(), stores.logWriter.close()]);
        expect(indexed()).toBe(enabled);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('applyLogSearch (SQLite)', () => {
  it('changes the schema only when the settings differ from what the file holds', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-search-'));
    const db = openSqlite(join(dir, 'requests.db'));
    try {
      runSqliteMigrations(db, LOG_MIGRATIONS); // v4's index, from before these settings
      expect(applyLogSearch(db, { enabled: true, bodyChars: 8192 })).toBe('rebuilt');
      expect(applyLogSearch(db, { enabled: true, bodyChars: 8192 })).toBe('unchanged');
      expect(applyLogSearch(db, { enabled: true, bodyChars: 100 })).toBe('rebuilt');
      expect(applyLogSearch(db, { enabled: false, bodyChars: 100 })).toBe('dropped');
      expect(applyLogSearch(db, { enabled: false, bodyChars: 8192 })).toBe('unchanged');
      expect(hasSearchIndex(db)).toBe(false);
      expect(applyLogSearch(db, { enabled: true, bodyChars: 0 })).toBe('rebuilt');
      expect(hasSearchIndex(db)).toBe(true);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('applyPgLogSearch (PostgreSQL)', () => {
  /** Runs `test` on a fresh database of its own. */
  async function withDatabase(test: (pool: pg.Pool, url: string) => Promise<void>): Promise<void> {
    const db = await createTestDatabase();
    const pool = testPool(db.url);
    try {
      await test(pool, db.url);
    } finally {
      await pool.end();
      await db.drop();
    }
  }
  const filenode = async (pool: pg.Pool) =>
    (await pool.query<{ f: string }>(`SELECT pg_relation_filenode('requests')::text AS f`)).rows[0]!.f;

  it('builds the current index on a new install (an empty table), where v4 made a whole-body column', () =>
    withDatabase(async (pool) => {
      await runPgMigrations(pool, 'log', PG_LOG_MIGRATIONS);
      expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 })).toBe('rebuilt');
      expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 })).toBe('unchanged');
    }));

  it("keeps an index from before streams' search text without rewriting the table; off and on rebuilds it", () =>
    withDatabase(async (pool, url) => {
      const told: string[] = [];
      const notify = (msg: string) => told.push(msg);
      const acct = `acct-${newId()}`;
      const frame = (text: string) => `data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`;
      const stream = makeLogRow({
        account_id: acct,
        stream: true,
        response_body: frame('Kooka') + frame('burra laughs'),
        response_search_text: 'Kookaburra laughs',
      });
      // What that release left: its column read a response by its body, and said so in its comment.
      await runPgMigrations(
        pool,
        'log',
        PG_LOG_MIGRATIONS.filter((m) => m.version <= 5),
      );
      await pool.query(`ALTER TABLE requests DROP COLUMN search_vector`);
      await pool.query(`ALTER TABLE requests ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        to_tsvector('simple'::regconfig, regexp_replace(coalesce(response_body, ''), '[^[:alnum:]]+', ' ', 'g'))
      ) STORED`);
      await pool.query(`COMMENT ON COLUMN requests.search_vector IS 'keyrelay search: body_chars=8192'`);
      await runPgMigrations(pool, 'log', PG_LOG_MIGRATIONS);
      const store = new PgLogStore(url);
      const find = async (q: string) =>
        ids((await store.listRequests({ account_id: acct, search: q }, { limit: 50 })).items);
      try {
        await store.insertBatch([stream]);
        const before = await filenode(pool);
        expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 }, notify)).toBe('kept');
        expect(await filenode(pool)).toBe(before);
        expect(told.join('\n')).toContain('SSE frames');
        expect(await find('laughs')).toEqual([stream.id]);
        expect(await find('kookaburra')).toEqual([]); // the frames split it
        expect(await applyPgLogSearch(pool, { enabled: false, bodyChars: 8192 }, notify)).toBe('dropped');
        expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 }, notify)).toBe('rebuilt');
        expect(await find('kookaburra')).toEqual([stream.id]);
        expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 }, notify)).toBe('unchanged');
      } finally {
        await store.close();
      }
    }));

  it('keeps an index from before these settings without rewriting the table; off and on rebuilds it', () =>
    withDatabase(async (pool, url) => {
      const told: string[] = [];
      const notify = (msg: string) => told.push(msg);
      await runPgMigrations(pool, 'log', PG_LOG_MIGRATIONS); // v4's whole-body column, no comment
      // A log with rows: an empty one (a new install) is rebuilt, as there is nothing to rewrite.
      const writer = new PgLogStore(url);
      await writer.insertBatch([makeLogRow()]);
      await writer.close();
      const before = await filenode(pool);
      expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 }, notify)).toBe('kept');
      expect(await filenode(pool)).toBe(before); // no rewrite at upgrade
      expect(told.join('\n')).toContain('KEYRELAY_LOG_SEARCH=false');
      expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 100 }, notify)).toBe('kept');
      expect(await applyPgLogSearch(pool, { enabled: false, bodyChars: 8192 }, notify)).toBe('dropped');
      expect(await hasSearchColumn(pool)).toBe(false);
      expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 }, notify)).toBe('rebuilt');
      expect(await applyPgLogSearch(pool, { enabled: true, bodyChars: 8192 }, notify)).toBe('unchanged');
      expect(told.at(-1)).toBe('request log search index rebuilt');
    }));
});

/**
 * What the release before streams' search text (SQLite migration v6) left in a file with the default body
 * limit: its view and triggers read a response by its body alone. Copied from sqlite_master of a file that
 * release wrote.
 */
const capped8192 = (c: string) =>
  `CASE WHEN length(${c}) <= 8192 THEN ${c} ELSE substr(${c}, 1, 4096) || ' ' || substr(${c}, -4096) END`;
const legacyValues = (p: string) =>
  `${p}.rowid, ${p}.model, ${p}.path, ${p}.end_user, ${p}.session, ${capped8192(`${p}.request_body`)}, ${capped8192(`${p}.response_body`)}`;
const FTS_COLUMNS = 'model, path, end_user, session, request_body, response_body';
const LEGACY_INDEX_SQL = [
  `CREATE VIRTUAL TABLE requests_fts USING fts5(${FTS_COLUMNS}, content = 'requests', content_rowid = 'rowid', tokenize = 'unicode61 remove_diacritics 2', detail = none, columnsize = 0)`,
  `CREATE VIEW requests_fts_source AS SELECT rowid AS row, model, path, end_user, session, ${capped8192('request_body')} AS request_body, ${capped8192('response_body')} AS response_body FROM requests`,
  `CREATE TRIGGER requests_fts_delete AFTER DELETE ON requests BEGIN INSERT INTO requests_fts (requests_fts, rowid, ${FTS_COLUMNS}) VALUES ('delete', ${legacyValues('old')}); END`,
  `CREATE TRIGGER requests_fts_update AFTER UPDATE ON requests BEGIN INSERT INTO requests_fts (requests_fts, rowid, ${FTS_COLUMNS}) VALUES ('delete', ${legacyValues('old')}); INSERT INTO requests_fts (rowid, ${FTS_COLUMNS}) VALUES (${legacyValues('new')}); END`,
];

describe("SQLite: an index from before streams' search text", () => {
  const frame = (text: string) => `data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`;

  /** A file as that release left it, with rows it indexed; `downgraded`: rows with search text among them. */
  function legacyFile(path: string, rows: RequestLogRow[], downgraded: boolean): void {
    const db = openSqlite(path);
    try {
      runSqliteMigrations(
        db,
        LOG_MIGRATIONS.filter((m) => m.version <= (downgraded ? 6 : 5)),
      );
      db.exec(`DROP TRIGGER requests_fts_insert; DROP TRIGGER requests_fts_delete;
        DROP TRIGGER requests_fts_update; DROP TABLE requests_fts;`);
      for (const sql of LEGACY_INDEX_SQL) db.exec(sql);
      // The columns that release's table had (later migrations add more), each row's values picked by name.
      const present = new Set(
        db
          .prepare<[], { name: string }>("SELECT name FROM pragma_table_info('requests')")
          .all()
          .map((c) => c.name),
      );
      const picked = LOG_COLUMNS.flatMap((c, i) => (present.has(c) ? [{ c, i }] : []));
      const insert = db.prepare(
        `INSERT INTO requests (${picked.map((p) => p.c).join(', ')}) VALUES (${picked.map(() => '?').join(', ')})`,
      );
      for (const values of encodeRows(rows).encoded) insert.run(...picked.map((p) => values[p.i]));
      db.exec(
        `INSERT INTO requests_fts (rowid, ${FTS_COLUMNS}) SELECT row, ${FTS_COLUMNS} FROM requests_fts_source`,
      );
    } finally {
      db.close();
    }
  }

  it.each([
    ['an upgrade', false],
    ['an upgrade after a downgrade (rows with search text, indexed by their frames)', true],
  ])(
    '%s: swaps the view and triggers without reindexing, and stays in step with deletes',
    async (_, downgraded) => {
      const dir = mkdtempSync(join(tmpdir(), 'keyrelay-search-'));
      const path = join(dir, 'requests.db');
      const acct = `acct-${newId()}`;
      const t = Date.parse('2026-07-01T00:00:00.000Z');
      const old = makeLogRow({
        account_id: acct,
        at: t,
        stream: true,
        response_body: frame('Wom') + frame('bat wallaby'),
        ...(downgraded ? { response_search_text: 'Wombat wallaby' } : {}),
      });
      const json = makeLogRow({ account_id: acct, at: t + 1, request_body: body('tabby cat') });
      legacyFile(path, [old, json], downgraded);
      const told: string[] = [];
      const store = new SqliteLogStore(path, { onSearchIndex: (m) => told.push(m) });
      const find = async (q: string) =>
        ids((await store.listRequests({ account_id: acct, search: q }, { limit: 50 })).items);
      try {
        await store.migrate();
        expect(told).toEqual([
          'request log search index now reads streamed responses by their text (no reindex)',
        ]);
        expect(await find('tabby')).toEqual([json.id]);
        expect(await find('wallaby')).toEqual([old.id]);
        // Split across its frames: found only where the row has search text.
        expect(await find('wombat')).toEqual(downgraded ? [old.id] : []);
        const fresh = makeLogRow({
          account_id: acct,
          at: t + 2,
          stream: true,
          response_body: frame('Kooka') + frame('burra'),
          response_search_text: 'Kookaburra',
        });
        await store.insertBatch([fresh]);
        expect(await find('kookaburra')).toEqual([fresh.id]);
        // Deletes remove exactly the words the index holds: a row that takes a deleted row's rowid is not
        // found by that row's words.
        await store.prune(new Date(t + 3).toISOString());
        const reuse = makeLogRow({ account_id: acct, at: t + 4, request_body: body('nothing shared') });
        await store.insertBatch([reuse]);
        for (const q of ['wallaby', 'wombat', 'tabby', 'kookaburra', 'burra', 'bat'])
          expect(await find(q)).toEqual([]);
        expect(await find('shared')).toEqual([reuse.id]);
        await store.close();
        const db = openSqlite(path);
        try {
          db.exec(`INSERT INTO requests_fts (requests_fts, rank) VALUES ('integrity-check', 0)`);
          expect(applyLogSearch(db, { enabled: true, bodyChars: 8192 })).toBe('unchanged');
        } finally {
          db.close();
        }
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

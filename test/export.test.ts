/**
 * The request log out, as a user takes it: the console API's export and `keyrelay requests export`, on
 * SQLite and on PostgreSQL; the CSV read back by a CSV parser, formula-looking text neutralised, unicode,
 * quotes and newlines kept; filters applied; other accounts' rows never in it.
 */
import { parse as parseCsv } from 'csv-parse/sync';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORT_COLUMNS } from '../src/log/export.js';
import type { RequestSummary } from '../src/store/types.js';
import type { RequestLogRow } from '../src/types.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';
import { runCli } from './helpers/process.js';

/** Text a spreadsheet would run, unicode, quotes, separators and line breaks. */
const AWKWARD = [
  '=HYPERLINK("http://evil.example","click")',
  '+1+1',
  '-2+3',
  '@SUM(A1:A9)',
  'José, "the" 👩‍💻\r\nsecond line',
  ' padded ',
  'plain',
];
/** More than one page of the export's reads (500), so the paging is crossed. */
const ROWS = 1234;

interface Setup {
  h: Harness;
  accountId: string;
  email: string;
  cookie: string;
  rows: RequestLogRow[];
}

async function setUp(env: Record<string, string>): Promise<Setup> {
  const h = await startHarness(env);
  const email = `export-${Date.now()}@example.com`;
  const user = await h.newUser(email);
  const other = await h.newUser();
  const t0 = Date.parse('2026-03-01T00:00:00.000Z');
  const rows: RequestLogRow[] = [];
  for (let i = 0; i < ROWS; i++) {
    const odd = AWKWARD[i % AWKWARD.length]!;
    rows.push(
      makeLogRow({
        at: t0 + i * 1000,
        account_id: user.accountId,
        key_id: user.keyId,
        end_user: odd,
        session: `s-${i % 5}`,
        model: i % 2 ? 'gpt-4o-mini' : 'claude-sonnet-4-5',
        provider: i % 2 ? 'openai' : 'anthropic',
        cost_usd: i % 9 === 0 ? null : i / 1e6,
        properties: { note: odd, env: i % 3 ? 'prod' : 'dev' },
      }),
    );
  }
  rows.push(makeLogRow({ at: t0, account_id: other.accountId, key_id: other.keyId, end_user: 'not-mine' }));
  for (let i = 0; i < rows.length; i += 200) await h.kr.services.logStore.insertBatch(rows.slice(i, i + 200));
  const login = await request(`${h.url}/api/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify({ email, password: 'correct horse battery' }),
  });
  expect(login.statusCode).toBe(200);
  await login.body.dump();
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  return {
    h,
    accountId: user.accountId,
    email,
    cookie,
    rows: rows.filter((r) => r.account_id === user.accountId),
  };
}

/** The row as an export shows it: the list's fields, in export order. */
function summary(r: RequestLogRow): Record<string, unknown> {
  return Object.fromEntries(EXPORT_COLUMNS.map((c) => [c, r[c] ?? null]));
}

const newestFirst = (rows: RequestLogRow[]) => [...rows].sort((a, b) => (a.id < b.id ? 1 : -1));

/** What a spreadsheet user reads in a cell, back to the value: the guard quote removed. */
function unguard(cell: string): string {
  return /^'[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell;
}

function readCsv(text: string): Record<string, string>[] {
  return parseCsv<Record<string, string>>(text, { bom: true, columns: true, relax_column_count: false });
}

function expectCsvMatches(records: Record<string, string>[], rows: RequestLogRow[]) {
  expect(records.length).toBe(rows.length);
  records.forEach((rec, i) => {
    const want = rows[i]!;
    expect(Object.keys(rec)).toEqual(EXPORT_COLUMNS);
    expect(rec.id).toBe(want.id);
    expect(unguard(rec.end_user!)).toBe(want.end_user);
    expect(rec.session).toBe(want.session);
    expect(rec.cost_usd).toBe(want.cost_usd === null ? '' : String(want.cost_usd));
    expect(rec.stream).toBe(String(want.stream));
    expect(JSON.parse(rec.properties!)).toEqual(want.properties);
  });
}

for (const store of ['sqlite', 'postgres'] as const) {
  describe(`export on ${store}`, () => {
    let s: Setup;
    let db: TestDatabase | null = null;

    beforeAll(async () => {
      db = store === 'postgres' ? await createTestDatabase() : null;
      s = await setUp(db ? { KEYRELAY_DATABASE_URL: db.url } : {});
    }, 120_000);
    afterAll(async () => {
      await s?.h.close();
      await db?.drop();
    });

    const get = async (query: string) => {
      const res = await request(`${s.h.url}/api/console/requests/export?${query}`, {
        headers: { cookie: s.cookie },
      });
      // As bytes: body.text() would drop the byte-order mark, as a TextDecoder does.
      const text = Buffer.from(await res.body.arrayBuffer()).toString('utf8');
      return { status: res.statusCode, headers: res.headers, text };
    };

    it('gives every row of the account as CSV a parser reads back, newest first', async () => {
      const r = await get('format=csv');
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(String(r.headers['content-disposition'])).toMatch(
        /^attachment; filename="keyrelay-requests-.*\.csv"$/,
      );
      expect(r.text.startsWith('\uFEFFid,created_at,')).toBe(true);
      expect(r.text).not.toContain('not-mine');
      expectCsvMatches(readCsv(r.text), newestFirst(s.rows));
    });

    it('neutralises text a spreadsheet would run as a formula, and keeps the rest as it was', async () => {
      const records = readCsv((await get('format=csv&limit=7')).text);
      const users = records.map((rec) => rec.end_user);
      for (const formula of AWKWARD.slice(0, 4)) expect(users).toContain(`'${formula}`);
      expect(users).toContain('José, "the" 👩‍💻\r\nsecond line');
      expect(users).toContain(' padded ');
      expect(users).toContain('plain');
      for (const rec of records) expect(rec.end_user).not.toMatch(/^[=+\-@]/);
    });

    it('gives NDJSON: one JSON object per line, each equal to the row', async () => {
      const r = await get('format=ndjson');
      expect(r.headers['content-type']).toBe('application/x-ndjson; charset=utf-8');
      const lines = r.text.split('\n');
      expect(lines.pop()).toBe('');
      expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(newestFirst(s.rows).map(summary));
    });

    it('applies the filters of the list', async () => {
      const r = await get(`format=ndjson&session=s-3&provider=openai&from=2026-03-01T00:05:00Z`);
      const want = newestFirst(s.rows).filter(
        (row) =>
          row.session === 's-3' && row.provider === 'openai' && row.created_at >= '2026-03-01T00:05:00.000Z',
      );
      expect(want.length).toBeGreaterThan(10);
      const got = r.text
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { id: string }).id);
      expect(got).toEqual(want.map((row) => row.id));
      const byUser = await get(`format=csv&end_user=${encodeURIComponent(AWKWARD[0]!)}`);
      expect(readCsv(byUser.text).length).toBe(s.rows.filter((row) => row.end_user === AWKWARD[0]).length);
      const prop = await get('format=ndjson&property=env:dev&limit=3');
      expect(
        prop.text
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as RequestSummary).properties.env),
      ).toEqual(['dev', 'dev', 'dev']);
    });

    it('refuses an unknown filter, a bad format or time, and a caller without a session, clearly', async () => {
      for (const [query, field] of [
        ['format=csv&user=x', 'user'],
        ['format=xlsx', 'format'],
        ['', 'format'],
        ['format=csv&from=yesterday', 'from'],
        ['format=csv&limit=0', 'limit'],
      ] as const) {
        const r = await get(query);
        expect(r.status, query).toBe(400);
        const body = JSON.parse(r.text) as { error: { code: string; message: string } };
        expect(body.error.code).toBe('invalid_request');
        expect(body.error.message).toContain(field);
      }
      const anon = await request(`${s.h.url}/api/console/requests/export?format=csv`);
      expect(anon.statusCode).toBe(401);
      await anon.body.dump();
    });

    it('keyrelay requests export writes the same CSV and NDJSON to stdout', async () => {
      const env: Record<string, string> = db
        ? { KEYRELAY_DATABASE_URL: db.url, KEYRELAY_LOG_LEVEL: 'warn' }
        : { KEYRELAY_DATA_DIR: s.h.dataDir, KEYRELAY_LOG_LEVEL: 'warn' };
      const csv = await runCli(['requests', 'export', '--format', 'csv', '--email', s.email], env);
      expect(csv.stderr).toBe('');
      expect(csv.code).toBe(0);
      expect(csv.stdout).toBe((await get('format=csv')).text);
      expectCsvMatches(readCsv(csv.stdout), newestFirst(s.rows));
      const nd = await runCli(
        ['requests', 'export', '--format', 'ndjson', '--email', s.email, '--session', 's-1', '--limit', '30'],
        env,
      );
      expect(nd.code).toBe(0);
      const want = newestFirst(s.rows)
        .filter((row) => row.session === 's-1')
        .slice(0, 30)
        .map(summary);
      expect(
        nd.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as unknown),
      ).toEqual(want);
      const bad = await runCli(['requests', 'export', '--format', 'xml', '--email', s.email], env);
      expect([bad.code, bad.stderr]).toEqual([2, 'keyrelay: --format must be csv or ndjson (got xml)\n']);
      const noEmail = await runCli(['requests', 'export', '--format', 'csv'], env);
      expect(noEmail.code).toBe(2);
      expect(noEmail.stderr).toContain('--email is required');
    }, 60_000);
  });
}

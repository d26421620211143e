/**
 * Request-log search over 100,000 rows on both stores: fills a fresh SQLite file and a fresh PostgreSQL
 * database with realistic rows (bodies ~1 KB, many accounts' worth of text), then times searches as the
 * console sends them (one account, newest 50). Prints the median and worst of several runs per query.
 *
 *   npx tsx bench/search.ts [rows]      (default 100000; PostgreSQL at 127.0.0.1:5432, trust auth)
 *
 * KEYRELAY_LOG_SEARCH=false times the stores without their full-text index (the bounded scan).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { RequestLogRow } from '../src/types.js';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import type { LogStore } from '../src/store/types.js';
import { makeLogRow } from '../test/helpers/log-rows.js';
import { createTestDatabase } from '../test/helpers/pg.js';

const ROWS = Number(process.argv[2] ?? 100_000);
const ACCOUNT = 'acct-bench';
const WORDS = (
  'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa ' +
  'quebec romeo sierra tango uniform victor whiskey xray yankee zulu summarise translate refactor invoice ' +
  'weather recipe poem contract database kubernetes cluster latency budget customer'
).split(' ');

function text(i: number, n: number): string {
  let out = '';
  for (let k = 0; k < n; k++) out += WORDS[(i * 7 + k * 13) % WORDS.length] + ' ';
  return out;
}

function row(i: number, at: number): RequestLogRow {
  const rare = i % 10_000 === 0 ? ' quokka' : '';
  return makeLogRow({
    at,
    account_id: i % 3 === 0 ? ACCOUNT : `acct-${i % 97}`,
    key_id: `key-${i % 13}`,
    model: ['gpt-5-mini', 'claude-haiku-4-5', 'gpt-4.1-nano', 'claude-sonnet-4-6'][i % 4]!,
    end_user: `user-${i % 500}@example.com`,
    session: `sess-${i % 2000}`,
    request_body: JSON.stringify({ messages: [{ role: 'user', content: text(i, 120) + rare }] }),
    response_body: `data: ${JSON.stringify({ choices: [{ delta: { content: text(i + 1, 40) } }] })}\n\n`,
  });
}

async function fill(store: LogStore): Promise<number> {
  const started = performance.now();
  const t0 = Date.parse('2026-01-01T00:00:00.000Z');
  for (let i = 0; i < ROWS; i += 1000) {
    const batch = Array.from({ length: Math.min(1000, ROWS - i) }, (_, k) => row(i + k, t0 + (i + k) * 1000));
    await store.insertBatch(batch);
  }
  return performance.now() - started;
}

const QUERIES = [
  'quokka',
  'kubernetes cluster',
  'user-42@example.com',
  'claude haiku',
  'sess-1999',
  'nomatchword',
];

async function time(store: LogStore): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const q of QUERIES) {
    const ms: number[] = [];
    let found = 0;
    for (let run = 0; run < 7; run++) {
      const s = performance.now();
      const page = await store.listRequests({ account_id: ACCOUNT, search: q }, { limit: 50 });
      ms.push(performance.now() - s);
      found = page.items.length;
    }
    ms.sort((a, b) => a - b);
    out[q] = `median ${ms[3]!.toFixed(1)} ms, worst ${ms[6]!.toFixed(1)} ms (${found} on the first page)`;
  }
  return out;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-search-bench-'));
  const search = process.env.KEYRELAY_LOG_SEARCH !== 'false';
  const sqlite = new SqliteLogStore(join(dir, 'requests.db'), { search });
  await sqlite.migrate();
  const db = await createTestDatabase('keyrelay_bench');
  const pg = new PgLogStore(db.url, { search });
  await pg.migrate();
  try {
    // BENCH_STORES=postgres (or sqlite) measures one store only.
    const only = process.env.BENCH_STORES;
    for (const [name, store] of [
      ['sqlite', sqlite],
      ['postgres', pg],
    ] as const) {
      if (only && only !== name) continue;
      const fillMs = await fill(store);
      console.log(`${name}: ${ROWS} rows written in ${(fillMs / 1000).toFixed(1)} s`);
      for (const [q, result] of Object.entries(await time(store))) console.log(`  ${name} "${q}": ${result}`);
    }
  } finally {
    await sqlite.close();
    await pg.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();

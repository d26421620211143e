/**
 * The request log's export and attribution breakdowns over a million rows, on both stores. Fills a fresh
 * SQLite data directory and a fresh PostgreSQL database with one account's rows spread over 30 days, then:
 *
 * - runs `keyrelay requests export` (CSV, then NDJSON) as an operator does, reading its stdout as fast as it
 *   comes, and samples the exporting process's RSS every 100 ms: printed at each tenth of the rows written,
 *   so a flat line shows the export holds a page, not the log;
 * - times each usage breakdown the console asks for over the 30 days (by model, key, end user, session,
 *   credential, property), median and worst of five;
 * - times an end user's spend over the 30 days (what a key's budget per end user reads when an instance
 *   first sees that end user), median and worst over five end users.
 *
 *   npx tsx bench/export.ts [rows]      (default 1000000; PostgreSQL at 127.0.0.1:5432, trust auth)
 *   BENCH_STORES=sqlite (or postgres) measures one store only.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import type { BreakdownBy, LogStore } from '../src/store/types.js';
import type { RequestLogRow } from '../src/types.js';
import { makeLogRow } from '../test/helpers/log-rows.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { runCli } from '../test/helpers/process.js';
import { ROOT } from './keyrelay.js';
import { readRssMb } from './processes.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const EMAIL = 'export-bench@example.com';
const DAY_MS = 86_400_000;
const SPAN_MS = 30 * DAY_MS;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const FEATURES = ['search', 'chat', 'summarise', 'translate', '=formula'];

function row(i: number, account: string, key: string): RequestLogRow {
  return makeLogRow({
    at: T0 + Math.floor((i * SPAN_MS) / ROWS),
    account_id: account,
    key_id: key,
    model: ['gpt-5-mini', 'claude-haiku-4-5', 'gpt-4.1-nano', 'claude-sonnet-4-6'][i % 4]!,
    end_user: `customer-${i % 5000}`,
    session: `run-${i % 50_000}`,
    credential_fingerprint: `fp-${i % 7}`,
    properties: { feature: FEATURES[i % FEATURES.length]!, env: i % 10 ? 'prod' : 'staging' },
    cost_usd: (i % 100) / 10_000,
    request_body: null,
    response_body: null,
  });
}

async function fill(store: LogStore, account: string, key: string): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < ROWS; i += 1000) {
    const n = Math.min(1000, ROWS - i);
    await store.insertBatch(Array.from({ length: n }, (_, k) => row(i + k, account, key)));
  }
  return performance.now() - started;
}

/** Runs the export, counts its lines, samples its RSS; RSS at each tenth of the rows. */
async function exportOnce(env: Record<string, string>, format: 'csv' | 'ndjson'): Promise<string> {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'requests', 'export', '--format', format, '--email', EMAIL],
    { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let lines = 0;
  let bytes = 0;
  let peak = 0;
  const atTenths: number[] = [];
  const perTenth = ROWS / 10;
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    bytes += d.length;
    for (let i = d.indexOf(10); i !== -1; i = d.indexOf(10, i + 1)) lines++;
  });
  const sampler = setInterval(() => {
    const rss = readRssMb(child.pid!);
    if (!Number.isNaN(rss)) peak = Math.max(peak, rss);
    while (atTenths.length < 10 && lines >= perTenth * (atTenths.length + 1)) atTenths.push(rss);
  }, 100);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(sampler);
  if (code !== 0) throw new Error(`export exited ${code}: ${stderr}`);
  const s = (performance.now() - started) / 1000;
  const header = format === 'csv' ? 1 : 0;
  return (
    `${format}: ${lines - header} rows, ${(bytes / 2 ** 20).toFixed(0)} MiB in ${s.toFixed(1)} s; ` +
    `RSS MiB at each tenth: ${atTenths.map((r) => r.toFixed(0)).join(' ')}; peak ${peak.toFixed(0)}`
  );
}

const BREAKDOWNS: BreakdownBy[] = [
  'model',
  'key_id',
  'end_user',
  'session',
  'credential_fingerprint',
  { property: 'feature' },
];

async function timeBreakdowns(store: LogStore, account: string): Promise<string[]> {
  const f = {
    account_id: account,
    from: new Date(T0).toISOString(),
    to: new Date(T0 + SPAN_MS).toISOString(),
  };
  const out: string[] = [];
  for (const by of BREAKDOWNS) {
    const ms: number[] = [];
    let groups = 0;
    for (let run = 0; run < 5; run++) {
      const s = performance.now();
      groups = (await store.usageBreakdown(f, by)).length;
      ms.push(performance.now() - s);
    }
    ms.sort((a, b) => a - b);
    const name = typeof by === 'string' ? by : `property:${by.property}`;
    out.push(`${name}: median ${ms[2]!.toFixed(0)} ms, worst ${ms[4]!.toFixed(0)} ms (${groups} groups)`);
  }
  return out;
}

/** One end user's spend of the key since the span's start, for five end users (LogStore.spendSince). */
async function timeEndUserSpend(store: LogStore, key: string): Promise<string> {
  const since = new Date(T0).toISOString();
  const ms: number[] = [];
  let usd = 0;
  for (const n of [0, 1, 1234, 2500, 4999]) {
    const s = performance.now();
    usd = await store.spendSince(key, since, `customer-${n}`);
    ms.push(performance.now() - s);
  }
  ms.sort((a, b) => a - b);
  return `median ${ms[2]!.toFixed(1)} ms, worst ${ms[4]!.toFixed(1)} ms (last: $${usd.toFixed(4)})`;
}

async function account(env: Record<string, string>): Promise<{ id: string; key: string }> {
  const migrated = await runCli(['migrate'], env);
  if (migrated.code !== 0) throw new Error(migrated.stderr);
  const made = await runCli(
    ['users', 'create', '--email', EMAIL, '--password', 'correct horse battery', '--json'],
    env,
  );
  if (made.code !== 0) throw new Error(made.stderr);
  const out = JSON.parse(made.stdout) as { account: { id: string }; key: { id: string } };
  return { id: out.account.id, key: out.key.id };
}

async function measure(name: string, env: Record<string, string>, open: () => LogStore): Promise<void> {
  const owner = await account(env);
  const store = open();
  await store.migrate();
  try {
    const ms = await fill(store, owner.id, owner.key);
    console.log(`${name}: ${ROWS} rows written in ${(ms / 1000).toFixed(1)} s`);
    for (const line of await timeBreakdowns(store, owner.id)) console.log(`  ${name} breakdown ${line}`);
    console.log(`  ${name} end user's spend ${await timeEndUserSpend(store, owner.key)}`);
  } finally {
    await store.close();
  }
  for (const format of ['csv', 'ndjson'] as const)
    console.log(`  ${name} export ${await exportOnce(env, format)}`);
}

async function main(): Promise<void> {
  const only = process.env.BENCH_STORES;
  const quiet = { KEYRELAY_LOG_LEVEL: 'warn' };
  if (!only || only === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-export-bench-'));
    try {
      await measure(
        'sqlite',
        { ...quiet, KEYRELAY_DATA_DIR: dir },
        () => new SqliteLogStore(join(dir, 'requests.db')),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (!only || only === 'postgres') {
    const db = await createTestDatabase('keyrelay_bench');
    try {
      await measure('postgres', { ...quiet, KEYRELAY_DATABASE_URL: db.url }, () => new PgLogStore(db.url));
    } finally {
      await db.drop();
    }
  }
}

await main();

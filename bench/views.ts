/**
 * The console's views over a million rows, on both stores, and what they cost the proxy beside them
 * (`npm run bench -- --views`). For each store: a fresh SQLite data directory, or a fresh PostgreSQL database
 * (dropped after), is filled with a month of realistic rows through the log store's own insertBatch (many
 * keys, end users, sessions, credentials, properties, models of both providers, some failures, some unpriced
 * and some partial costs, short bodies); then keyrelay, built and pinned to CPU 1 as `npm run bench` runs it,
 * serves them, and the bench, signed in as the console is, times each view's first page and each breakdown
 * over the 30 days through the console API (median and worst of several runs; over 0.5 s is flagged).
 * Last, the proxy's latency at a fixed rate (the fake upstream and the load driver on CPU 0), idle and while
 * the views are asked for in a loop, alternated: the ratio of the two p99s.
 *
 *   npm run bench -- --views [--rows N] [--stores sqlite,postgres] [--runs N] [--rate R] [--load-ms MS] [--nice] [--no-build]
 *
 * A view is one entry of VIEWS (a console route and its query, or a store call where only the CLI reads it).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { request } from 'undici';
import { newId } from '../src/ids.js';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { BREAKDOWN_COLUMNS, REQUEST_SORT_KEYS, type LogStore } from '../src/store/types.js';
import type { RequestLogRow } from '../src/types.js';
import { makeLogRow } from '../test/helpers/log-rows.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { compileBench } from './compile.js';
import { buildServer, keyrelayCli, startKeyrelay } from './keyrelay.js';
import {
  readMetrics,
  readRssMb,
  readThreadCpuMs,
  startBenchServer,
  startDriver,
  useScriptDir,
  type Child,
  type Driver,
} from './processes.js';
import type { OpenResult, Target } from './protocol.js';
import { raisePriority } from './setup.js';
import { median } from './stats.js';

const HELP = `usage: npm run bench -- --views [--rows N] [--stores sqlite,postgres] [--runs N] [--rate R] [--load-ms MS] [--nice] [--no-build] [--no-pin]
  --rows N        rows in each store's log, over the last 30 days (default 1000000)
  --stores LIST   sqlite, postgres or both (default both; PostgreSQL at 127.0.0.1:5432, trust auth)
  --runs N        timed runs of each view after one untimed (default 3): median and worst
  --rate R        requests/s of the proxy latency steps (default 500)
  --load-ms MS    length of each latency step, idle or beside the views (default 8000)
  --nice          run the bench, keyrelay, the fake upstream and the load at nice -15 (root), as
                  \`npm run bench -- --nice\` does: a PostgreSQL on this machine then works the views on
                  the CPU they leave, as a database on its own machine would, instead of taking turns
                  with keyrelay on its core
  --no-export     skip exporting the whole log through the console API (NDJSON, keyrelay's RSS sampled)
  --no-build      use the existing dist/
  --no-pin        do not pin keyrelay to CPU 1 and the load to CPU 0`;

interface Options {
  rows: number;
  stores: ('sqlite' | 'postgres')[];
  runs: number;
  rate: number;
  loadMs: number;
  build: boolean;
  pin: boolean;
  export: boolean;
  nice: boolean;
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    rows: 1_000_000,
    stores: ['sqlite', 'postgres'],
    runs: 3,
    rate: 500,
    loadMs: 8000,
    build: true,
    pin: true,
    export: true,
    nice: false,
  };
  const int = (v: string | undefined): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n <= 0) usage(2);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--rows') o.rows = int(argv[++i]);
    else if (a === '--runs') o.runs = int(argv[++i]);
    else if (a === '--rate') o.rate = int(argv[++i]);
    else if (a === '--load-ms') o.loadMs = int(argv[++i]);
    else if (a === '--no-build') o.build = false;
    else if (a === '--no-pin') o.pin = false;
    else if (a === '--no-export') o.export = false;
    else if (a === '--nice') o.nice = true;
    else if (a === '--stores') {
      const list = (argv[++i] ?? '').split(',');
      if (!list.every((s) => s === 'sqlite' || s === 'postgres')) usage(2);
      o.stores = list;
    } else usage(a === '--help' || a === '-h' ? 0 : 2);
  }
  return o;
}

function usage(code: number): never {
  console.log(HELP);
  process.exit(code);
}

const DAY_MS = 86_400_000;
const SPAN_MS = 30 * DAY_MS;
/** What the issue asks of every view's first page and every breakdown over 30 days. */
const TARGET_MS = 500;
/** The proxy's first seconds at a rate (JIT, pools, the log writer's first batches) are not its idle p99. */
const WARM_MS = 4000;
const EMAIL = 'views-bench@example.com';
const PASSWORD = 'views-bench-password-4k9x';
const log = (msg: string): void => void process.stderr.write(`[views] ${msg}\n`);

// A month of traffic as a product with many customers sends it: the counts are what a busy deployment sees.
const KEYS = 40;
const END_USERS = 5000;
const SESSIONS = 50_000;
const CREDENTIALS = 7;
const MODELS = [
  ['openai', 'gpt-5-mini', '/v1/chat/completions'],
  ['openai', 'gpt-4.1-nano', '/v1/chat/completions'],
  ['openai', 'gpt-4o', '/v1/responses'],
  ['anthropic', 'claude-haiku-4-5', '/v1/messages'],
  ['anthropic', 'claude-sonnet-4-6', '/v1/messages'],
  ['anthropic', 'claude-opus-4-1', '/v1/messages'],
] as const;
const FEATURES = ['search', 'chat', 'summarise', 'translate', 'agent', 'classify'];
const TEAMS = ['growth', 'support', 'platform', 'research'];
const WORDS = (
  'summarise translate refactor invoice weather recipe poem contract database kubernetes cluster latency ' +
  'budget customer order refund shipping address schedule meeting report quarterly revenue forecast'
).split(' ');

function words(i: number, n: number): string {
  let out = '';
  for (let k = 0; k < n; k++) out += `${WORDS[(i * 7 + k * 13) % WORDS.length]} `;
  return out.trim();
}

/**
 * A session of the month's middle rows (benchRow's): retention, which starts pruning a minute after keyrelay
 * starts, takes the oldest rows while the views run.
 */
function middleSession(n: number): string {
  return `run-${Math.floor(Math.floor(n / 2) / 20) % SESSIONS}`;
}

/** The i-th of n rows, spread evenly over the 30 days before `end`. */
export function benchRow(i: number, n: number, end: number, owner: Owner): RequestLogRow {
  const at = end - SPAN_MS + Math.floor((i * SPAN_MS) / n);
  const [provider, model, path] = MODELS[(i * 31) % MODELS.length]!;
  const failed = i % 50 === 7;
  const unpriced = i % 97 === 3;
  const partial = i % 211 === 5;
  const input = 50 + ((i * 37) % 4000);
  const output = failed ? 0 : 10 + ((i * 53) % 900);
  const text = words(i, 24);
  return makeLogRow({
    at,
    id: newId(at),
    account_id: owner.account,
    org_id: owner.account,
    key_id: i % 5 === 0 ? owner.key : `key-bench-${i % KEYS}`,
    provider,
    path,
    model,
    stream: i % 3 !== 0,
    status: failed ? (i % 100 === 7 ? 500 : 429) : 200,
    outcome: failed ? 'upstream_error' : 'ok',
    error_code: failed ? 'upstream_error' : null,
    latency_ms: 200 + ((i * 7919) % 9000),
    ttfb_ms: 80 + ((i * 104_729) % 900),
    input_tokens: input,
    cache_read_tokens: i % 4 === 0 ? Math.floor(input / 2) : 0,
    output_tokens: output,
    cost_usd: unpriced ? null : (input * 0.15 + output * 0.6) / 1e6,
    price_source: unpriced
      ? `unpriced: no price for ${model}`
      : partial
        ? 'partial: web_search has no price'
        : 'genai-prices@0.1.8',
    end_user: i % 10 === 9 ? null : `customer-${(i * 7) % END_USERS}`,
    session: i % 4 === 3 ? null : `run-${Math.floor(i / 20) % SESSIONS}`,
    credential_fingerprint: `fp-bench-${i % CREDENTIALS}`,
    properties: {
      feature: FEATURES[i % FEATURES.length]!,
      team: TEAMS[(i >> 2) % TEAMS.length]!,
      ...(i % 3 === 0 ? { env: i % 9 === 0 ? 'staging' : 'prod' } : {}),
    },
    request_body: JSON.stringify({ model, messages: [{ role: 'user', content: text }] }),
    response_body: failed ? '{"error":{"type":"rate_limit_error"}}' : words(i + 1, 16),
    response_headers:
      provider === 'openai'
        ? {
            'x-ratelimit-remaining-requests': String(9000 - (i % 1000)),
            'x-ratelimit-limit-requests': '10000',
          }
        : { 'anthropic-ratelimit-requests-remaining': String(900 - (i % 100)) },
  });
}

export interface Owner {
  account: string;
  key: string;
  secret: string;
}

/** A view: a console route and its query, as the console asks for it, or a store call only the CLI makes. */
type View =
  | { name: string; path: string; query?: Record<string, string> }
  | { name: string; store: (s: LogStore, from: string, to: string) => Promise<unknown> };

/**
 * Each view's first page and each breakdown over the 30 days; `range` is the 30 days' from and to,
 * `session` one session's name.
 */
function views(range: { from: string; to: string }, session: string): View[] {
  // Ranked by cost, as the end-user and credential views rank (the store's work is the same for any rank).
  const breakdown = (by: string): View => ({
    name: `breakdown by ${by}`,
    path: '/usage/breakdown',
    query: { ...range, by, rank: 'cost' },
  });
  return [
    { name: 'requests, newest first', path: '/requests' },
    ...REQUEST_SORT_KEYS.flatMap((by) =>
      (['desc', 'asc'] as const).map((dir) => ({
        name: `requests by ${by} ${dir}`,
        path: '/requests',
        query: { sort: `${by}:${dir}` },
      })),
    ),
    { name: 'requests, one property', path: '/requests', query: { property: 'feature:agent' } },
    { name: 'search "invoice refund"', path: '/requests', query: { q: 'invoice refund' } },
    { name: 'usage series by hour', path: '/usage/series', query: { ...range, bucket: 'hour' } },
    { name: 'usage series by day', path: '/usage/series', query: { ...range, bucket: 'day' } },
    ...BREAKDOWN_COLUMNS.map((by) => breakdown(by)),
    breakdown('property:feature'),
    breakdown('property:team'),
    { name: 'credentials', path: '/credentials', query: range },
    // One end user's and one session's pages, as the end-user and session views link to them.
    {
      name: 'end user: series by day',
      path: '/usage/series',
      query: { ...range, end_user: 'customer-77', bucket: 'day' },
    },
    { name: 'end user: requests', path: '/requests', query: { end_user: 'customer-77' } },
    { name: 'end user: by model', path: '/usage/breakdown', query: { ...range, end_user: 'customer-77' } },
    { name: 'session: requests', path: '/requests', query: { session } },
    { name: 'sessions', path: '/sessions', query: range },
    { name: 'session: timeline', path: '/sessions/detail', query: { session } },
    {
      name: 'usage split by end user',
      path: '/usage/series/split',
      query: { ...range, bucket: 'day', split_by: 'end_user' },
    },
    { name: 'key: by model', path: '/usage/breakdown', query: { ...range, key_id: 'key-bench-3' } },
    { name: 'pricing gaps (store; `keyrelay prices`)', store: (s, from, to) => s.pricingGaps(from, to) },
  ];
}

interface Console {
  origin: string;
  cookie: string;
}

async function signIn(origin: string): Promise<Console> {
  const res = await request(`${origin}/api/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
  });
  const body = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`sign-in: ${res.statusCode} ${body.slice(0, 300)}`);
  const set = res.headers['set-cookie'];
  const cookie = (Array.isArray(set) ? set : [set ?? ''])
    .map((c) => c.split(';')[0]!)
    .filter(Boolean)
    .join('; ');
  return { origin, cookie };
}

/** Asks for one view; resolves to its milliseconds and a one-word size of the answer. */
async function ask(view: View, c: Console, store: LogStore, range: { from: string; to: string }) {
  const started = performance.now();
  if ('store' in view) {
    const out = await view.store(store, range.from, range.to);
    return { ms: performance.now() - started, size: Array.isArray(out) ? `${out.length} groups` : '' };
  }
  const qs = new URLSearchParams(view.query ?? {}).toString();
  const res = await request(`${c.origin}/api/console${view.path}${qs ? `?${qs}` : ''}`, {
    headers: { cookie: c.cookie },
  });
  const text = await res.body.text();
  const ms = performance.now() - started;
  if (res.statusCode !== 200) throw new Error(`${view.name}: ${res.statusCode} ${text.slice(0, 300)}`);
  const body = JSON.parse(text) as Record<string, unknown>;
  const list = body.items ?? body.rows ?? body.points ?? body.credentials ?? body.calls;
  const size = Array.isArray(list) ? `${list.length} ${Object.keys(body).find((k) => body[k] === list)}` : '';
  return { ms, size };
}

interface Timed {
  store: string;
  view: string;
  median_ms: number;
  worst_ms: number;
  /** keyrelay's main thread's CPU over a run (median): what a view costs the proxy's event loop. */
  main_cpu_ms: number;
  size: string;
}

async function timeViews(
  name: string,
  list: View[],
  c: Console,
  store: LogStore,
  range: { from: string; to: string },
  runs: number,
  pid: number,
): Promise<Timed[]> {
  const out: Timed[] = [];
  const mainCpuMs = (): number => readThreadCpuMs(pid).get(pid) ?? NaN;
  for (const view of list) {
    await ask(view, c, store, range); // untimed: the statement prepared, the pages in the cache
    const ms: number[] = [];
    const cpu: number[] = [];
    let size = '';
    for (let r = 0; r < runs; r++) {
      const before = mainCpuMs();
      const got = await ask(view, c, store, range);
      cpu.push(mainCpuMs() - before);
      ms.push(got.ms);
      size = got.size;
    }
    const t = {
      store: name,
      view: view.name,
      median_ms: median(ms),
      worst_ms: Math.max(...ms),
      main_cpu_ms: median(cpu),
      size,
    };
    out.push(t);
    log(
      `${name} ${view.name}: median ${t.median_ms.toFixed(0)} ms, worst ${t.worst_ms.toFixed(0)} ms` +
        `, keyrelay's main thread ${t.main_cpu_ms.toFixed(0)} ms` +
        `${t.size ? ` (${t.size})` : ''}${t.median_ms > TARGET_MS ? '  OVER 0.5 s' : ''}`,
    );
  }
  return out;
}

/**
 * The whole log exported through the console API (NDJSON, as the console's download link asks for it),
 * read as fast as it comes, with keyrelay's RSS sampled every 100 ms: at each tenth of the rows, so a flat
 * line shows the export holds a page, not the log. `bench/export.ts` does the same for the CLI.
 */
async function exportViaApi(c: Console, pid: number, rows: number): Promise<string> {
  const before = readRssMb(pid);
  const started = performance.now();
  const res = await request(`${c.origin}/api/console/requests/export?format=ndjson`, {
    headers: { cookie: c.cookie },
  });
  if (res.statusCode !== 200) throw new Error(`export: ${res.statusCode} ${await res.body.text()}`);
  let lines = 0;
  let bytes = 0;
  let peak = before;
  const atTenths: number[] = [];
  const sampler = setInterval(() => {
    const rss = readRssMb(pid);
    if (!Number.isNaN(rss)) peak = Math.max(peak, rss);
    while (atTenths.length < 10 && lines >= (rows / 10) * (atTenths.length + 1)) atTenths.push(rss);
  }, 100);
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
  }
  clearInterval(sampler);
  const s = (performance.now() - started) / 1000;
  return (
    `${lines} rows, ${(bytes / 2 ** 20).toFixed(0)} MiB in ${s.toFixed(1)} s; keyrelay RSS MiB before ` +
    `${before.toFixed(0)}, at each tenth ${atTenths.map((r) => r.toFixed(0)).join(' ')}; peak ${peak.toFixed(0)}`
  );
}

interface LatencyStep {
  store: string;
  step: 'idle' | 'views';
  p50: number;
  p99: number;
  errors: number;
  views_asked: number;
  /** keyrelay's event-loop delay over the step (prom-client's monitorEventLoopDelay), ms. */
  loop_p99_ms: number;
  loop_max_ms: number;
}

/**
 * The proxy at a fixed rate, idle and with the views asked for one after another beside it, alternated
 * (idle, views, idle, views, idle) so a slow moment of the shared machine does not land on one side only.
 */
async function measureProxy(
  name: string,
  driver: Driver,
  target: Target,
  list: View[],
  c: Console,
  store: LogStore,
  range: { from: string; to: string },
  o: Options,
): Promise<LatencyStep[]> {
  const warm = await driver.run<OpenResult>({ kind: 'open', target, rate: o.rate, durationMs: WARM_MS });
  if (warm.errors > 0) log(`${name} warm-up: ${warm.errors} errors of ${warm.sent}`);
  const steps: LatencyStep[] = [];
  for (const step of ['idle', 'views', 'idle', 'views', 'idle'] as const) {
    let stop = false;
    let asked = 0;
    const loop =
      step === 'views'
        ? (async () => {
            for (let i = 0; !stop; i++) {
              await ask(list[i % list.length]!, c, store, range);
              asked++;
            }
          })()
        : Promise.resolve();
    // prom-client resets its event-loop delay histogram on each scrape: this one starts the step's.
    await readMetrics(target.origin);
    const r = await driver.run<OpenResult>({ kind: 'open', target, rate: o.rate, durationMs: o.loadMs });
    stop = true;
    await loop;
    // How late keyrelay's event loop ran its timers (src/metrics.ts samples every 10 ms, included in the
    // values): its own work and what other processes took of its core, which the p99 alone cannot tell.
    const m = await readMetrics(target.origin);
    const s = {
      store: name,
      step,
      p50: r.latency.p50,
      p99: r.latency.p99,
      errors: r.errors,
      views_asked: asked,
      loop_p99_ms: (m?.get('nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000,
      loop_max_ms: (m?.get('nodejs_eventloop_lag_max_seconds') ?? NaN) * 1000,
    };
    steps.push(s);
    log(
      `${name} proxy ${step}: p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms, ${s.errors} errors` +
        `, keyrelay's event-loop delay p99 ${s.loop_p99_ms.toFixed(1)} ms, max ${s.loop_max_ms.toFixed(1)} ms` +
        (step === 'views' ? `, ${asked} views asked` : ''),
    );
  }
  return steps;
}

async function fill(store: LogStore, rows: number, end: number, owner: Owner): Promise<void> {
  const started = performance.now();
  const BATCH = 1000;
  for (let i = 0; i < rows; i += BATCH) {
    const n = Math.min(BATCH, rows - i);
    const { inserted } = await store.insertBatch(
      Array.from({ length: n }, (_, k) => benchRow(i + k, rows, end, owner)),
    );
    if (inserted !== n) throw new Error(`insertBatch stored ${inserted} of ${n}`);
    if ((i / BATCH) % 100 === 99) log(`  ${i + n} rows…`);
  }
  log(`${rows} rows written in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

async function measureStore(
  name: 'sqlite' | 'postgres',
  o: Options,
  load: { upstream: string; driver: Driver; pin?: string },
): Promise<{ timed: Timed[]; proxy: LatencyStep[]; exported: string | null }> {
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-views-bench-'));
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir);
  const db = name === 'postgres' ? await createTestDatabase('keyrelay_viewbench') : null;
  const env: Record<string, string> = {
    KEYRELAY_DATA_DIR: dataDir,
    ...(db ? { KEYRELAY_DATABASE_URL: db.url } : {}),
  };
  let kr: Child | null = null;
  let store: LogStore | null = null;
  try {
    await keyrelayCli(env, ['migrate']);
    const made = JSON.parse(
      await keyrelayCli(env, ['users', 'create', '--email', EMAIL, '--password', PASSWORD, '--json']),
    ) as { account: { id: string }; key: { id: string; key: string } };
    const owner = { account: made.account.id, key: made.key.id, secret: made.key.key };
    store = db ? new PgLogStore(db.url) : new SqliteLogStore(join(dataDir, 'requests.db'));
    await store.migrate();
    const end = Date.now();
    log(`${name}: filling ${o.rows} rows…`);
    await fill(store, o.rows, end, owner);
    if (db) {
      // What autovacuum does to a table that grew by a month's rows, long before anyone asks for that month:
      // statistics for the planner, and the visibility map that lets index-only scans skip the table.
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      await client.query('VACUUM ANALYZE requests, usage_daily');
      await client.end();
    }
    kr = await startKeyrelay({
      dataDir,
      upstream: load.upstream,
      requestLog: true,
      pin: load.pin,
      logFile: join(dir, 'keyrelay.log'),
      env: { ...env, KEYRELAY_LOG_LEVEL: 'warn' },
    });
    const origin = `http://127.0.0.1:${kr.port}`;
    const c = await signIn(origin);
    // The 30 days the rows span, ending a minute on so the newest are in.
    const range = { from: new Date(end - SPAN_MS).toISOString(), to: new Date(end + 60_000).toISOString() };
    const list = views(range, middleSession(o.rows));
    const timed = await timeViews(name, list, c, store, range, o.runs, kr.pid);
    const target: Target = {
      name,
      origin,
      paths: {
        openai: '/api/proxy/openai/v1/chat/completions',
        anthropic: '/api/proxy/anthropic/v1/messages',
      },
      headers: {
        openai: { 'proxy-api-key': owner.secret, authorization: 'Bearer sk-bench' },
        anthropic: {
          'proxy-api-key': owner.secret,
          'x-api-key': 'sk-ant-bench',
          'anthropic-version': '2023-06-01',
        },
      },
    };
    const proxy = await measureProxy(name, load.driver, target, list, c, store, range, o);
    const exported = o.export ? await exportViaApi(c, kr.pid, o.rows) : null;
    if (exported) log(`${name} export through the console API: ${exported}`);
    return { timed, proxy, exported };
  } finally {
    await kr?.stop();
    await store?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(timed: Timed[], proxy: LatencyStep[], o: Options): void {
  const stores = [...new Set(timed.map((t) => t.store))];
  const names = [...new Set(timed.map((t) => t.view))];
  const width = Math.max(...names.map((n) => n.length));
  console.log(
    `\nViews over ${o.rows.toLocaleString('en')} rows (30 days), median / worst of ${o.runs}, ms; ` +
      `in brackets keyrelay's main-thread CPU a run (median, in 10 ms ticks):`,
  );
  console.log(`${'view'.padEnd(width)}  ${stores.map((s) => s.padStart(24)).join('')}`);
  for (const v of names) {
    const cells = stores.map((s) => {
      const t = timed.find((x) => x.store === s && x.view === v);
      if (!t) return '—'.padStart(24);
      const mark = t.median_ms > TARGET_MS ? ' !' : '  ';
      const cpu = `(${t.main_cpu_ms.toFixed(0)})`.padStart(7);
      return `${t.median_ms.toFixed(0).padStart(7)} / ${t.worst_ms.toFixed(0).padStart(5)}${cpu}${mark}`;
    });
    console.log(`${v.padEnd(width)}  ${cells.join('')}`);
  }
  const over = timed.filter((t) => t.median_ms > TARGET_MS);
  console.log(
    over.length === 0
      ? `Every view's median is under ${TARGET_MS} ms.`
      : `Over ${TARGET_MS} ms (!): ${over.map((t) => `${t.store} ${t.view}`).join('; ')}`,
  );
  console.log(
    `\nProxy at ${o.rate} requests/s, ${o.loadMs} ms steps (idle and beside the views, alternated)` +
      `${o.nice ? ', the bench at nice -15' : ''}:`,
  );
  for (const s of stores) {
    const steps = proxy.filter((p) => p.store === s);
    const idle = steps.filter((p) => p.step === 'idle');
    const busy = steps.filter((p) => p.step === 'views');
    if (idle.length === 0 || busy.length === 0) continue;
    const p99 = (l: LatencyStep[]) => median(l.map((p) => p.p99));
    const idleList = idle.map((p) => p.p99.toFixed(2)).join(', ');
    const busyList = busy.map((p) => p.p99.toFixed(2)).join(', ');
    console.log(
      `${s}: p99 idle ${idleList} ms; beside the views ${busyList} ms ` +
        `(${busy.reduce((n, p) => n + p.views_asked, 0)} views asked); ` +
        `median ratio ${(p99(busy) / p99(idle)).toFixed(2)}; ` +
        `errors ${steps.reduce((n, p) => n + p.errors, 0)}`,
    );
    const loop = (l: LatencyStep[]) =>
      l.map((p) => `${p.loop_p99_ms.toFixed(1)}/${p.loop_max_ms.toFixed(1)}`).join(', ');
    console.log(
      `${' '.repeat(s.length)}  keyrelay's event-loop delay p99/max idle ${loop(idle)} ms; beside the views ${loop(busy)} ms`,
    );
  }
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const pinProxy = o.pin ? '1' : undefined;
  const pinLoad = o.pin ? '0' : undefined;
  // The bench asks for the views from the load's core, never keyrelay's (as `npm run bench` samples).
  if (pinLoad) execFileSync('taskset', ['-a', '-p', '-c', pinLoad, String(process.pid)], { stdio: 'ignore' });
  if (o.build) {
    log('building the server (tsc -p tsconfig.build.json)…');
    const warning = await buildServer();
    if (warning) log(warning);
  }
  const compiled = compileBench();
  useScriptDir(compiled.dir);
  const upstream = await startBenchServer('upstream.ts', [], pinLoad);
  const driver = startDriver(pinLoad);
  // keyrelay, started later by this process, inherits its nice.
  const restorePriority = o.nice ? raisePriority([process.pid, driver.pid, upstream.pid], log) : null;
  const timed: Timed[] = [];
  const proxy: LatencyStep[] = [];
  const exports: string[] = [];
  try {
    for (const name of o.stores) {
      const got = await measureStore(name, o, {
        upstream: `http://127.0.0.1:${upstream.port}`,
        driver,
        pin: pinProxy,
      });
      timed.push(...got.timed);
      proxy.push(...got.proxy);
      if (got.exported) exports.push(`${name}: ${got.exported}`);
    }
  } finally {
    driver.stop();
    await upstream.stop();
    compiled.remove();
    restorePriority?.();
  }
  report(timed, proxy, o);
  if (exports.length > 0)
    console.log(`\nExport of the whole log through the console API (NDJSON):\n${exports.join('\n')}`);
}

// Run, unless imported for its rows (to fill a log by hand and study a query's plan).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();

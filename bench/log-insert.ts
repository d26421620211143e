/**
 * What one request-log row costs the SQLite writer, in isolation: SqliteLogStore.insertBatch in batches of
 * 500 rows (the writer's transaction size under load, KEYRELAY_LOG_BATCH_SIZE) into a fresh file, CPU time (process.cpuUsage) per row, median of
 * several runs, with the full-text index on and off (KEYRELAY_LOG_SEARCH) and three body sizes; with the index
 * on, also as it was before streams had search text (it read their SSE frames).
 *
 *   npx tsx bench/log-insert.ts [rows] [runs]      (default 20000 rows, 5 runs)
 *
 * KEYRELAY_LOG_SEARCH_BODY_CHARS sets the index's body limit as keyrelay would (default 8192).
 *
 *   npx tsx bench/log-insert.ts --indexes [rows] [runs]
 *
 * instead: what each of the table's secondary indexes and the full-text index cost a row of the bench's
 * non-streaming request, each dropped in turn, then all of them: the floor of a row's
 * cost in this table (docs/performance.md, "Eleventh pass").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RequestLogRow } from '../src/types.js';
import { openSqlite } from '../src/store/sqlite/db.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { makeLogRow } from '../test/helpers/log-rows.js';
import { BODIES } from './protocol.js';

const indexes = process.argv.includes('--indexes');
const [rowsArg, runsArg] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const ROWS = Number(rowsArg ?? 20_000);
const RUNS = Number(runsArg ?? 5);
const BATCH = Number(process.env.KEYRELAY_LOG_BATCH_SIZE ?? 500);
const BODY_CHARS = Number(process.env.KEYRELAY_LOG_SEARCH_BODY_CHARS ?? 8192);
const WORDS = (
  'the quick brown fox jumps over lazy dog summarise translate refactor invoice weather recipe poem contract ' +
  'database kubernetes cluster latency budget customer please explain why this function returns undefined'
).split(' ');

function text(i: number, words: number): string {
  let out = '';
  for (let k = 0; k < words; k++) out += WORDS[(i * 7 + k * 13) % WORDS.length] + ' ';
  return out;
}

/**
 * A chat request with a system prompt and history (~`reqWords` words) and a streamed answer, its chunks in
 * the shape OpenAI sends them. `frames`: no search text, so the index reads the SSE frames, as before
 * migration v6; otherwise the row carries the search text the response tap builds (first event, then text).
 */
function row(i: number, reqWords: number, chunkCount: number, frames: boolean): RequestLogRow {
  const pieces = Array.from({ length: chunkCount }, (_, k) => `${WORDS[(i + k) % WORDS.length]} `);
  const chunks = pieces.map(
    (content) =>
      `data: {"id":"chatcmpl-B${i}","object":"chat.completion.chunk","created":1764000000,` +
      `"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,` +
      `"delta":{"content":${JSON.stringify(content)}},"logprobs":null,"finish_reason":null}]}\n\n`,
  );
  return makeLogRow({
    at: Date.parse('2026-01-01T00:00:00.000Z') + i,
    account_id: `acct-${i % 7}`,
    end_user: `user-${i % 500}@example.com`,
    session: `sess-${i % 2000}`,
    request_body: JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: text(i, reqWords / 2) },
        { role: 'user', content: text(i + 1, reqWords / 2) },
      ],
    }),
    response_body: chunks.join(''),
    response_search_text: frames ? null : `${chunks[0]!.slice(0, -2)}\n${pieces.join('')}`,
  });
}

async function once(rows: RequestLogRow[], search: boolean, drop: string[] = []): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-log-insert-'));
  const file = join(dir, 'requests.db');
  const migrating = new SqliteLogStore(file, { search, searchBodyChars: BODY_CHARS });
  await migrating.migrate();
  await migrating.close();
  const db = openSqlite(file);
  for (const index of drop) db.exec(`DROP INDEX ${index}`);
  db.close();
  const store = new SqliteLogStore(file, { search, searchBodyChars: BODY_CHARS });
  try {
    const t = process.cpuUsage();
    for (let i = 0; i < rows.length; i += BATCH) await store.insertBatch(rows.slice(i, i + BATCH));
    const u = process.cpuUsage(t);
    return (u.user + u.system) / rows.length;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The bench's non-streaming chat completion as the log keeps it (its request; bench/upstream.ts's answer). */
function plainRow(i: number): RequestLogRow {
  return makeLogRow({
    at: Date.parse('2026-01-01T00:00:00.000Z') + i,
    account_id: `acct-${i % 7}`,
    stream: false,
    request_body: BODIES.openai.plain,
    response_body:
      `{"id":"chatcmpl-bench","object":"chat.completion","created":1764000000,"model":"gpt-4o-mini",` +
      `"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?",` +
      `"refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
      `"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`,
    response_search_text: null,
  });
}

if (indexes) {
  const SECONDARY = ['requests_account_id', 'requests_key_id', 'requests_with_body'];
  const rows = Array.from({ length: ROWS }, (_, i) => plainRow(i));
  const cases: [string, boolean, string[]][] = [
    ['as shipped (3 secondary indexes, full-text index)', true, []],
    ...SECONDARY.map((x): [string, boolean, string[]] => [`without ${x}`, true, [x]]),
    ['without the full-text index', false, []],
    ['without any of them (the row and its id alone)', false, SECONDARY],
  ];
  const results = cases.map((): number[] => []);
  for (let r = 0; r < RUNS; r++)
    for (const [k, [, search, drop]] of cases.entries()) results[k]!.push(await once(rows, search, drop));
  const shipped = median(results[0]!);
  for (const [k, [label]] of cases.entries()) {
    const m = median(results[k]!);
    const delta = k === 0 ? '' : `  (${(m - shipped).toFixed(1)})`;
    console.log(`${label.padEnd(52)} ${m.toFixed(1)} µs/row${delta}`);
  }
  process.exit(0);
}

for (const [label, words, chunkCount] of [
  ['tiny request, 3-chunk stream', 4, 3],
  ['~1.5 KB request, 50-chunk stream', 200, 50],
  ['~12 KB request, 50-chunk stream', 1600, 50],
] as const) {
  const rows = Array.from({ length: ROWS }, (_, i) => row(i, words, chunkCount, false));
  const frameRows = rows.map((r) => ({ ...r, response_search_text: null }));
  const on: number[] = [];
  const frames: number[] = [];
  const off: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    on.push(await once(rows, true));
    frames.push(await once(frameRows, true));
    off.push(await once(rows, false));
  }
  const bytes = rows.reduce((n, x) => n + (x.request_body?.length ?? 0) + (x.response_body?.length ?? 0), 0);
  const list = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(' ');
  console.log(
    `${label} (${Math.round(bytes / ROWS)} body chars/row): search on ${median(on).toFixed(1)} µs/row, ` +
      `on reading the stream's frames (before v6) ${median(frames).toFixed(1)}, off ${median(off).toFixed(1)}  ` +
      `[on ${list(on)}; frames ${list(frames)}; off ${list(off)}]`,
  );
}

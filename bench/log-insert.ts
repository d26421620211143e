/**
 * What one request-log row costs the SQLite writer, in isolation: SqliteLogStore.insertBatch in batches of
 * 500 rows (the writer's transaction size under load, KEYRELAY_LOG_BATCH_SIZE) into a fresh file, CPU time (process.cpuUsage) per row, median of
 * several runs, with the full-text index on and off (KEYRELAY_LOG_SEARCH) and three body sizes.
 *
 *   npx tsx bench/log-insert.ts [rows] [runs]      (default 20000 rows, 5 runs)
 *
 * KEYRELAY_LOG_SEARCH_BODY_CHARS sets the index's body limit as keyrelay would (default 8192).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RequestLogRow } from '../src/types.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { makeLogRow } from '../test/helpers/log-rows.js';

const ROWS = Number(process.argv[2] ?? 20_000);
const RUNS = Number(process.argv[3] ?? 5);
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

/** A chat request with a system prompt and history (~`reqWords` words) and a streamed answer. */
function row(i: number, reqWords: number, chunkCount: number): RequestLogRow {
  const chunks = Array.from(
    { length: chunkCount },
    (_, k) =>
      `data: {"id":"chatcmpl-${i}","choices":[{"delta":{"content":"${WORDS[(i + k) % WORDS.length]} "}}]}\n\n`,
  ).join('');
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
    response_body: chunks,
  });
}

async function once(rows: RequestLogRow[], search: boolean): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-log-insert-'));
  const store = new SqliteLogStore(join(dir, 'requests.db'), { search, searchBodyChars: BODY_CHARS });
  try {
    await store.migrate();
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

for (const [label, words, chunkCount] of [
  ['as in npm run bench (tiny bodies)', 4, 3],
  ['~1.5 KB request, 30-chunk stream', 200, 30],
  ['~12 KB request, 30-chunk stream', 1600, 30],
] as const) {
  const rows = Array.from({ length: ROWS }, (_, i) => row(i, words, chunkCount));
  const on: number[] = [];
  const off: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    on.push(await once(rows, true));
    off.push(await once(rows, false));
  }
  const bytes = rows.reduce((n, x) => n + (x.request_body?.length ?? 0) + (x.response_body?.length ?? 0), 0);
  console.log(
    `${label} (${Math.round(bytes / ROWS)} body chars/row): search on ${median(on).toFixed(1)} µs/row, ` +
      `off ${median(off).toFixed(1)} µs/row  [on ${on.map((x) => x.toFixed(0)).join(' ')}; off ${off.map((x) => x.toFixed(0)).join(' ')}]`,
  );
}

/**
 * What a read of a large SQLite request log costs the proxied requests (docs/performance.md, "Twelfth pass"):
 * the event loop's longest stall while one query runs, on the caller's thread (SqliteLogStore, as keyrelay
 * read before) and on the worker thread keyrelay reads on now (SqliteLogThread). One key's history of ROWS
 * rows (no bodies) over 30 days; each query 3 times, medians. Run pinned, as keyrelay is in the bench:
 *
 *   taskset -c 1 npx tsx bench/read-stall.ts [rows]      (default 1,000,000)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { SqliteLogThread } from '../src/store/sqlite/log-thread.js';
import type { LogStore } from '../src/store/types.js';
import { makeLogRow } from '../test/helpers/log-rows.js';
import { median } from './stats.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'keyrelay-read-stall-'));
const path = join(dir, 'requests.db');
const now = Date.now();

{
  const t0 = performance.now();
  const fill = new SqliteLogStore(path, { search: false });
  await fill.migrate();
  const step = (30 * DAY) / ROWS;
  for (let done = 0; done < ROWS;) {
    const n = Math.min(5000, ROWS - done);
    const rows = Array.from({ length: n }, (_, i) =>
      makeLogRow({
        at: Math.floor(now - 30 * DAY + (done + i) * step),
        request_body: null,
        response_body: null,
        response_search_text: null,
      }),
    );
    await fill.insertBatch(rows);
    done += n;
  }
  await fill.close();
  console.log(
    `${ROWS.toLocaleString('en')} rows of one key over 30 days in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
}

const iso = (ms: number) => new Date(ms).toISOString();
const month = { account_id: 'acct-1', from: iso(now - 30 * DAY), to: iso(now + 1000) };
const queries: [string, (s: LogStore) => Promise<unknown>][] = [
  ['budget spend, a day (spendSince)', (s) => s.spendSince('key-1', iso(now - DAY))],
  ['budget spend, a month (spendSince)', (s) => s.spendSince('key-1', iso(now - 30 * DAY))],
  ['console chart, a month by day (usageSeries)', (s) => s.usageSeries(month, 'day')],
  ['console breakdown, a month by model (usageBreakdown)', (s) => s.usageBreakdown(month, 'model')],
  ['console list, first page of a month (listRequests)', (s) => s.listRequests(month, { limit: 50 })],
];

/** The longest gap between two turns of a 1 ms timer: how long a proxied request could have waited. */
let last = performance.now();
let longest = 0;
const ticker = setInterval(() => {
  const t = performance.now();
  longest = Math.max(longest, t - last);
  last = t;
}, 1);
const variants: [string, LogStore][] = [
  ['event loop', new SqliteLogStore(path)],
  ['worker thread', new SqliteLogThread(path)],
];
for (const [, store] of variants) await store.count(); // the worker started and the connections warm

console.log("query: wall ms / the event loop's longest stall ms, median of 3");
for (const [name, run] of queries) {
  const cells: string[] = [];
  for (const [variant, store] of variants) {
    const wall: number[] = [];
    const stall: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      await new Promise((r) => setTimeout(r, 20));
      last = performance.now();
      longest = 0;
      const t0 = performance.now();
      await run(store);
      wall.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 5)); // the ticker's turn after a stall
      stall.push(longest);
    }
    cells.push(`${variant} ${median(wall).toFixed(1)} / ${median(stall).toFixed(1)}`);
  }
  console.log(`${name.padEnd(54)} ${cells.join('   ')}`);
}
clearInterval(ticker);
for (const [, store] of variants) await store.close();
rmSync(dir, { recursive: true, force: true });

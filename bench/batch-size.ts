/**
 * What a request-log row costs the SQLite writer by the size of its transaction: rows like the bench's (a
 * ~1 KB chat request and answer, with end users and sessions), inserted as the writer's worker inserts them
 * (encodeRows, then insertEncoded on a connection that trusts the encoding), CPU per row after 2,000 rows.
 *
 *   taskset -c 1 npx tsx bench/batch-size.ts [--no-search]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteLogStore, encodeRows } from '../src/store/sqlite/log-store.js';
import { makeLogRow } from '../test/helpers/log-rows.js';

const SIZES = [10, 35, 100, 300, 500];
const ROWS = 12_000;
const WARM_ROWS = 2_000;

const search = !process.argv.includes('--no-search');
const request = JSON.stringify({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user', content: 'Tell me a short story about a proxy that counts tokens. '.repeat(7) }],
  max_tokens: 64,
});
const response = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  model: 'gpt-4o-mini',
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: 'Once upon a time a small proxy counted every token. '.repeat(6),
      },
      finish_reason: 'stop',
    },
  ],
  usage: { prompt_tokens: 120, completion_tokens: 45, total_tokens: 165 },
});

console.log(`full-text index ${search ? 'on' : 'off'}; CPU per row of insertEncoded by transaction size`);
for (const size of SIZES) {
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-batch-size-'));
  const store = new SqliteLogStore(join(dir, 'requests.db'), { search, trustEncoded: true });
  await store.migrate();
  let at = Date.now();
  let cpuUs = 0;
  let measured = 0;
  for (let n = 0; n < ROWS; n += size) {
    const rows = Array.from({ length: size }, (_, i) =>
      makeLogRow({
        at: at++,
        request_body: request,
        response_body: response,
        end_user: `user-${(n + i) % 50}`,
        session: `session-${(n + i) % 500}`,
      }),
    );
    const { encoded, rejected } = encodeRows(rows);
    const before = process.cpuUsage();
    store.insertEncoded(encoded, rejected);
    const used = process.cpuUsage(before);
    if (n < WARM_ROWS) continue;
    cpuUs += used.user + used.system;
    measured += size;
  }
  console.log(`  ${String(size).padStart(3)} rows a transaction: ${(cpuUs / measured).toFixed(1)} µs a row`);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * What an idle keyrelay holds after a few requests, as `npm run bench` reads "RSS idle": keyrelay (built:
 * dist/) pinned to CPU 1, 300 ms of one caller (non-streaming, then streams), then RSS second by second for
 * 40 s (its idle reclaim runs ~30 s in; with KEYRELAY_LOG_LEVEL=debug, /tmp/idle-probe-kr.log says when).
 *
 *   npm run build && taskset -c 0 npx tsx bench/idle-probe.ts [NAME=VALUE,...]
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { Pool } from 'undici';
import { createBenchKey, startKeyrelay } from './keyrelay.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const status = (pid: number) => {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const f = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)![1]) / 1024;
  return `rss ${f('VmRSS').toFixed(1)} anon ${f('RssAnon').toFixed(1)} file ${f('RssFile').toFixed(1)} threads ${/Threads:\s+(\d+)/.exec(s)![1]}`;
};
const env = Object.fromEntries(
  (process.argv[2] ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split('=') as [string, string]),
);
const up = spawn(process.execPath, ['--import', 'tsx', new URL('./upstream.ts', import.meta.url).pathname]);
const upPort = await new Promise<number>((resolve) =>
  up.stdout.once('data', (c: Buffer) => resolve((JSON.parse(c.toString()) as { port: number }).port)),
);
const dataDir = join(mkdtempSync(join(tmpdir(), 'kr-idle-')), 'data');
const key = await createBenchKey(dataDir);
const kr = await startKeyrelay({
  dataDir,
  upstream: `http://127.0.0.1:${upPort}`,
  requestLog: true,
  env,
  pin: '1',
  logFile: '/tmp/idle-probe-kr.log',
});
console.log('start', status(kr.pid));
const pool = new Pool(`http://127.0.0.1:${kr.port}`, { connections: 1 });
const headers = {
  'proxy-api-key': key,
  authorization: 'Bearer sk-bench',
  'content-type': 'application/json',
};
let n = 0;
const until = Date.now() + 300;
while (Date.now() < until) {
  const res = await pool.request({
    method: 'POST',
    path: '/api/proxy/openai/v1/chat/completions',
    headers,
    body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}',
  });
  await res.body.dump();
  n++;
}
for (const stream of [true, true]) {
  const u2 = Date.now() + 150;
  while (Date.now() < u2) {
    const res = await pool.request({
      method: 'POST',
      path: '/api/proxy/openai/v1/chat/completions?chunks=50&chunk_ms=0',
      headers,
      body:
        '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"stream":' + stream + '}',
    });
    await res.body.dump();
    n++;
  }
}
await pool.close();
console.log(`${n} requests`, status(kr.pid));
for (let s = 1; s <= 40; s++) {
  await sleep(1000);
  if (s % 3 === 0 || s >= 28) console.log(`+${s}s`, status(kr.pid));
}
const text = await (await fetch(`http://127.0.0.1:${kr.port}/metrics`)).text();
console.log(
  text
    .split('\n')
    .filter((l) => /^nodejs_heap_space_size_(used|total)|^nodejs_external/.test(l))
    .join('\n'),
);
process.kill(kr.pid);
up.kill();
process.exit(0);

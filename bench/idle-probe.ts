/**
 * What an idle keyrelay holds after a few requests, as `npm run bench` reads "RSS idle": keyrelay (built:
 * dist/) pinned to CPU 1, one caller for 300 ms of chat completions and 150 ms of streams on each provider
 * (the bench's first warm-up), then RSS second by second for 40 s (its idle reclaim runs ~30 s in; with
 * KEYRELAY_LOG_LEVEL=debug, /tmp/idle-probe-kr.log says when).
 *
 *   npm run build && taskset -c 0 npx tsx bench/idle-probe.ts [NAME=VALUE,...]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { compileBench } from './compile.js';
import { startProbe } from './keyrelay.js';
import { useScriptDir } from './processes.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const status = (pid: number) => {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mb = (k: string) => (Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)![1]) / 1024).toFixed(1);
  return `rss ${mb('VmRSS')} anon ${mb('RssAnon')} file ${mb('RssFile')} threads ${/Threads:\s+(\d+)/.exec(s)![1]}`;
};
const env = Object.fromEntries(
  (process.argv[2] ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split('=') as [string, string]),
);

const compiled = compileBench();
useScriptDir(compiled.dir);
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-idle-probe-'));
const { upstream, kr, key } = await startProbe(tmp, {
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
let sent = 0;
/** One caller, one request after another, for `ms`. */
async function callFor(ms: number, path: string, body: string): Promise<void> {
  for (const until = Date.now() + ms; Date.now() < until; sent++) {
    const res = await pool.request({ method: 'POST', path: `/api/proxy${path}`, headers, body });
    await res.body.dump({ limit: Number.POSITIVE_INFINITY });
  }
}
const hello = '"messages":[{"role":"user","content":"Say hello."}]';
await callFor(300, '/openai/v1/chat/completions', `{"model":"gpt-4o-mini",${hello},"max_tokens":16}`);
await callFor(150, '/openai/v1/chat/completions?chunks=50', `{"model":"gpt-4o-mini",${hello},"stream":true}`);
await callFor(
  150,
  '/anthropic/v1/messages?chunks=50',
  `{"model":"claude-3-5-haiku-latest",${hello},"max_tokens":16,"stream":true}`,
);
await pool.close();
console.log(`${sent} requests`, status(kr.pid));
for (let s = 1; s <= 40; s++) {
  await sleep(1000);
  if (s % 3 === 0 || s >= 28) console.log(`+${s}s`, status(kr.pid));
}
await Promise.all([kr.stop(), upstream.stop()]);
compiled.remove();
rmSync(tmp, { recursive: true, force: true });

/**
 * What `keyrelay serve` (built: dist/) keeps after load: idle 35 s, then 1,000 slow streams at once,
 * `--streams S` seconds of 64 concurrent streams (50 chunks, 2 ms apart; default 0) and `requests`
 * non-streaming calls on 64 connections against the fake upstream, then VmRSS and V8's heap spaces (from its
 * /metrics) at intervals while it idles again; idle reclaim runs 30 s into the quiet. Last, its threads and
 * its largest resident mappings ([heap] is glibc's main arena, anonymous 64 MB-aligned ones other threads').
 * `--pin CPU` runs keyrelay on that CPU alone, as `npm run bench` does (run the probe itself on another);
 * `--log FILE` keeps keyrelay's output (with KEYRELAY_LOG_LEVEL=debug: when its idle reclaim ran).
 *
 *   npm run build && npx tsx bench/memory-probe.ts [requests] [NAME=VALUE,...]   (default 30000; extra env)
 *   npm run build && taskset -c 0 npx tsx bench/memory-probe.ts 30000 --pin 1 --streams 10   (as the bench)
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { createBenchKey, startKeyrelay } from './keyrelay.js';

const argv = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv.splice(i, 2)[1] : undefined;
};
const PIN = option('--pin');
const LOG = option('--log');
const STREAM_SECONDS = Number(option('--streams') ?? 0);
const REQUESTS = Number(argv[0] ?? 30_000);
const env = Object.fromEntries(
  (argv[1] ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split('=') as [string, string]),
);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

async function heap(port: number): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const mb = (re: RegExp) => Math.round(Number(re.exec(text)?.[1] ?? NaN) / 1048576);
  const space = (name: string, what: 'total' | 'used') =>
    mb(new RegExp(`^nodejs_heap_space_size_${what}_bytes\\{space="${name}"\\} (\\S+)`, 'm'));
  return (
    `heap ${mb(/^nodejs_heap_size_used_bytes (\S+)/m)}/${mb(/^nodejs_heap_size_total_bytes (\S+)/m)} MB ` +
    `(old ${space('old', 'used')}/${space('old', 'total')}, new ${space('new', 'total')}, ` +
    `code ${space('code', 'total')}), external ${mb(/^nodejs_external_memory_bytes (\S+)/m)} MB`
  );
}

const OPENAI = '/api/proxy/openai/v1/chat/completions';
const up = spawn(process.execPath, ['--import', 'tsx', new URL('./upstream.ts', import.meta.url).pathname]);
const upPort = await new Promise<number>((resolve) =>
  up.stdout.once('data', (c: Buffer) => resolve((JSON.parse(c.toString()) as { port: number }).port)),
);
const dir = mkdtempSync(join(tmpdir(), 'keyrelay-memory-probe-'));
const dataDir = join(dir, 'data');
const key = await createBenchKey(dataDir);
const kr = await startKeyrelay({
  dataDir,
  upstream: `http://127.0.0.1:${upPort}`,
  requestLog: true,
  env,
  pin: PIN,
  logFile: LOG,
});
const headers = {
  'proxy-api-key': key,
  authorization: 'Bearer sk-bench',
  'content-type': 'application/json',
};
/** One streamed chat completion, read to its end; `query` tells the fake upstream its chunks and pace. */
async function stream(pool: Pool, query: string): Promise<void> {
  const res = await pool.request({
    method: 'POST',
    path: `${OPENAI}?${query}`,
    headers,
    body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"stream":true}',
  });
  await res.body.dump();
}

try {
  await sleep(35_000);
  const idle = rssMb(kr.pid);
  console.log(`idle ${idle.toFixed(0)} MB; ${await heap(kr.port)}`);

  const streams = new Pool(`http://127.0.0.1:${kr.port}`, { connections: 1000 });
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(kr.pid))), 100);
  await Promise.all(
    Array.from({ length: 1000 }, async () => {
      await stream(streams, 'chunks=8&chunk_ms=500');
    }),
  );
  clearInterval(sampler);
  await streams.close();
  console.log(`1,000 streams: peak ${peak.toFixed(0)} MB`);

  if (STREAM_SECONDS > 0) {
    const pool = new Pool(`http://127.0.0.1:${kr.port}`, { connections: 64 });
    const until = Date.now() + STREAM_SECONDS * 1000;
    let done = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (Date.now() < until) {
          await stream(pool, 'chunks=50&chunk_ms=2');
          done++;
        }
      }),
    );
    await pool.close();
    console.log(`${done} streams, 64 at a time: ${rssMb(kr.pid).toFixed(0)} MB at the end`);
  }

  const pool = new Pool(`http://127.0.0.1:${kr.port}`, { connections: 64 });
  let sent = 0;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (sent < REQUESTS) {
        sent++;
        const res = await pool.request({
          method: 'POST',
          path: OPENAI,
          headers,
          body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}',
        });
        await res.body.dump();
      }
    }),
  );
  await pool.close();
  console.log(`${REQUESTS} requests in ${Date.now() - t0} ms; ${rssMb(kr.pid).toFixed(0)} MB at the end`);
  let waited = 0;
  for (const at of [10, 25, 33, 40, 60]) {
    await sleep((at - waited) * 1000);
    waited = at;
    console.log(`+${at} s: ${rssMb(kr.pid).toFixed(0)} MB; ${await heap(kr.port)}`);
  }
  console.log(`after load − idle: ${(rssMb(kr.pid) - idle).toFixed(0)} MB`);
  const threads = execFileSync('ls', [`/proc/${kr.pid}/task`])
    .toString()
    .trim()
    .split('\n').length;
  const smaps = readFileSync(`/proc/${kr.pid}/smaps`, 'utf8');
  const maps = [
    ...smaps.matchAll(
      /^([0-9a-f]+-[0-9a-f]+) \S+ \S+ \S+ \S+ *(.*)\n(?:(?![0-9a-f]+-).*\n)*?Rss: +(\d+) kB/gm,
    ),
  ]
    .map((m) => ({ range: m[1]!, name: m[2] || '(anonymous)', kb: Number(m[3]) }))
    .sort((a, b) => b.kb - a.kb)
    .slice(0, 6);
  console.log(`${threads} threads; largest resident mappings:`);
  for (const m of maps) console.log(`  ${(m.kb / 1024).toFixed(1)} MB  ${m.name}  ${m.range}`);
} finally {
  await kr.stop();
  up.kill();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * What keyrelay's main thread allocates per streamed chunk: 64 concurrent OpenAI chat streams (50 chunks,
 * 2 ms apart, the bench's stream step) through a pinned keyrelay from dist/, under V8's sampling heap
 * profiler with the objects young-generation collections free included (a stream's garbage, which sets how
 * often scavenges come and how much gets promoted). Prints bytes per chunk, total and by allocating function.
 *
 *   npm run build && npx tsx bench/stream-alloc.ts [seconds] [--no-log] [--plain] [--promoted] [--main DIR]
 * (default 4 s, after 2 s warm-up). --plain: non-streaming chat completions instead, bytes per request (the
 * throughput step's requests). --promoted: only what outlived the young generation (objects scavenges freed
 * left out): what the old generation receives, which costs copying, marking and sweeping, by function.
 * --main DIR: the keyrelay built in DIR (e.g. a worktree of another commit).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { compileBench } from './compile.js';
import { startProbe } from './keyrelay.js';
import { useScriptDir } from './processes.js';

const seconds = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 4);
const requestLog = !process.argv.includes('--no-log');
const plain = process.argv.includes('--plain');
const promoted = process.argv.includes('--promoted');
const mainDir = process.argv.includes('--main')
  ? process.argv[process.argv.indexOf('--main') + 1]
  : undefined;
const CHUNKS = plain ? 1 : 50;
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-stream-alloc-'));
const out = join(tmp, 'alloc.heapprofile');
// Loaded into keyrelay with --require: SIGUSR2 starts sampling, SIGWINCH writes the profile.
const preload = join(tmp, 'sampling.cjs');
writeFileSync(
  preload,
  `const inspector = require('node:inspector');
const s = new inspector.Session();
s.connect();
process.on('SIGUSR2', () => s.post('HeapProfiler.startSampling', { samplingInterval: 4096,
  includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: ${!promoted} }));
process.on('SIGWINCH', () => s.post('HeapProfiler.stopSampling', (err, r) => {
  require('node:fs').writeFileSync(${JSON.stringify(out)}, err ? '' : JSON.stringify(r.profile));
}));
`,
);

const compiled = compileBench();
useScriptDir(compiled.dir);
const { upstream, kr, key } = await startProbe(tmp, {
  requestLog,
  pin: '1',
  nodeFlags: ['--require', preload],
  build: mainDir,
});
const pool = new Pool(`http://127.0.0.1:${kr.port}`, { connections: 64 });
const headers = {
  'proxy-api-key': key,
  authorization: 'Bearer sk-bench',
  'content-type': 'application/json',
};
const body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]${plain ? '' : ',"stream":true'}}`;
let streams = 0;
const run = (ms: number) =>
  Promise.all(
    Array.from({ length: 64 }, async () => {
      for (const until = Date.now() + ms; Date.now() < until; streams++) {
        const res = await pool.request({
          method: 'POST',
          path: `/api/proxy/openai/v1/chat/completions${plain ? '' : `?chunks=${CHUNKS}&chunk_ms=2`}`,
          headers,
          body,
        });
        await res.body.dump({ limit: Number.POSITIVE_INFINITY });
      }
    }),
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

await run(2000);
process.kill(kr.pid, 'SIGUSR2');
await sleep(100);
streams = 0;
await run(seconds * 1000);
process.kill(kr.pid, 'SIGWINCH');
for (let i = 0; i < 50 && !(readFileSafe(out) ?? ''); i++) await sleep(100);

interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Node[];
}
function readFileSafe(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
const profile = JSON.parse(readFileSafe(out) ?? '{}') as { head?: Node };
if (!profile.head) throw new Error('no heap profile written');
const bySite = new Map<string, number>();
let total = 0;
const walk = (n: Node): void => {
  const f = n.callFrame;
  const where = f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/dist\//, 'dist/');
  const site = `${f.functionName || '(anonymous)'} ${where}${where ? `:${f.lineNumber + 1}` : ''}`;
  bySite.set(site, (bySite.get(site) ?? 0) + n.selfSize);
  total += n.selfSize;
  n.children.forEach(walk);
};
walk(profile.head);
const chunks = streams * CHUNKS;
const what = plain ? `${streams} requests` : `${streams} streams, ${chunks} chunks`;
console.log(
  `${what} in ${seconds} s (request log ${requestLog ? 'on' : 'off'}): ` +
    `${Math.round(total / chunks)} bytes ${promoted ? 'outliving the young generation' : 'allocated'} per ` +
    `${plain ? 'request' : 'chunk'} on the main thread`,
);
for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 25))
  console.log(`${String(Math.round(bytes / chunks)).padStart(6)}  ${site}`);

await pool.close();
await Promise.all([kr.stop(), upstream.stop()]);
compiled.remove();
rmSync(tmp, { recursive: true, force: true });

/**
 * The stream step of `npm run bench` alone, bare proxy against keyrelay, with every stream's first-byte
 * time kept: where in a step the slowest first bytes fall (which burst of 64, how long after the step's
 * start). Same processes and pinning as the bench (proxies on CPU 1, upstream and load on CPU 0), the same
 * pause between a subject's steps as the bench leaves (its other columns run meanwhile).
 *   npx tsx bench/stream-probe.ts [--reps 5] [--gap-ms 6000] [--provider openai] [--env KEYRELAY_X=1]
 *     [--node-flag --trace-gc] [--no-build] [--fill-ms 15000] [--variant nolog:KEYRELAY_REQUEST_LOG=false,KEYRELAY_X=2]
 *     [--variant before:main=/tmp/worktree]   (main=DIR: the keyrelay built in DIR, e.g. a worktree of another commit)
 *     [--variant stgc:--single-threaded-gc]   (an item starting with -- is a node flag for that column alone)
 * --warm ID keeps that column's log writer running between its steps (one request a second).
 * Each --variant is one more keyrelay column (its own data dir), interleaved with the others like the bench.
 * keyrelay's stderr (e.g. --trace-gc) goes to bench/results/stream-probe-keyrelay.log.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { compileBench } from './compile.js';
import { buildServer, parseVariant, reclaimsBetween, ROOT, startVariant } from './keyrelay.js';
import { startBenchServer, useScriptDir, type Child } from './processes.js';
import { BODIES, upstreamQuery, type ProviderName } from './protocol.js';

const argv = process.argv.slice(2);
const arg = (name: string, def: string): string => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : def;
};
const all = (name: string): string[] =>
  argv.flatMap((a, i) => (a === name && argv[i + 1] ? [argv[i + 1]!] : []));
const reps = Number(arg('--reps', '5'));
const gapMs = Number(arg('--gap-ms', '6000'));
const providers = arg('--provider', 'openai,anthropic').split(',') as ProviderName[];
const concurrency = Number(arg('--streams', '64'));
const durationMs = Number(arg('--ms', '2500'));
const env = Object.fromEntries(all('--env').map((e) => [e.split('=')[0]!, e.split('=').slice(1).join('=')]));
const nodeFlags = all('--node-flag');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

if (!argv.includes('--no-build')) {
  const warning = await buildServer();
  if (warning) throw new Error(warning);
}
const compiled = compileBench();
useScriptDir(compiled.dir);
const upstream = await startBenchServer('upstream.ts', [], '0');
const upOrigin = `http://127.0.0.1:${upstream.port}`;
const bare = await startBenchServer('bare-proxy.ts', [upOrigin, upOrigin], '1');
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-probe-'));
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
const variants = [parseVariant('keyrelay:'), ...all('--variant').map(parseVariant)];
const krs: { id: string; child: Child; key: string; logFile: string }[] = [];
for (const v of variants) {
  const logFile = join(ROOT, `bench/results/stream-probe-${v.name}.log`);
  const { child, key } = await startVariant(v, {
    dataDir: join(tmp, v.name),
    upstream: upOrigin,
    nodeFlags,
    env,
    logFile,
  });
  krs.push({ id: v.name, child, key, logFile });
}

interface Subject {
  id: string;
  pid: number;
  /** keyrelay's log: its idle reclaims (bare has none). */
  logFile?: string;
  origin: string;
  prefix: string;
  headers: Record<ProviderName, Record<string, string>>;
}
const auth = {
  openai: { authorization: 'Bearer sk-bench' },
  anthropic: { 'x-api-key': 'sk-ant-bench', 'anthropic-version': '2023-06-01' },
};
const subjects: Subject[] = [
  { id: 'bare', pid: bare.pid, origin: `http://127.0.0.1:${bare.port}`, prefix: '/api/proxy', headers: auth },
  ...krs.map(({ id, child, key, logFile }) => ({
    id,
    pid: child.pid,
    logFile,
    origin: `http://127.0.0.1:${child.port}`,
    prefix: '/api/proxy',
    headers: {
      openai: { ...auth.openai, 'proxy-api-key': key },
      anthropic: { ...auth.anthropic, 'proxy-api-key': key },
    },
  })),
];
const pools = new Map<string, Pool>();
const pool = (s: Subject): Pool => {
  let p = pools.get(s.id);
  if (!p) pools.set(s.id, (p = new Pool(s.origin, { connections: 256, keepAliveTimeout: 60_000 })));
  return p;
};
const path = (p: ProviderName) => (p === 'openai' ? '/openai/v1/chat/completions' : '/anthropic/v1/messages');

interface Sample {
  worker: number;
  round: number;
  startMs: number;
  ttfbMs: number;
}

async function one(s: Subject, provider: ProviderName, stream: boolean, query: string): Promise<number> {
  const t0 = performance.now();
  const res = await pool(s).request({
    method: 'POST',
    path: s.prefix + path(provider) + query,
    headers: { ...s.headers[provider], 'content-type': 'application/json' },
    body: stream ? BODIES[provider].stream : BODIES[provider].plain,
  });
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${await res.body.text()}`);
  let first = 0;
  for await (const _ of res.body) if (first === 0) first = performance.now();
  return first - t0;
}

/** The bench's stream step: `concurrency` callers, each streaming one request after another. */
async function streamStep(
  s: Subject,
  provider: ProviderName,
  chunkMs: number,
  ms: number,
): Promise<Sample[]> {
  const query = upstreamQuery(50, chunkMs);
  const out: Sample[] = [];
  const t0 = performance.now();
  const deadline = t0 + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let round = 0; performance.now() < deadline; round += 1) {
        const start = performance.now();
        const ttfbMs = await one(s, provider, true, query);
        out.push({ worker, round, startMs: start - t0, ttfbMs });
      }
    }),
  );
  return out;
}

async function closed(s: Subject, n: number, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (performance.now() < deadline) await one(s, 'openai', false, '');
    }),
  );
}

const pct = (xs: number[], p: number): number => {
  const a = [...xs].sort((x, y) => x - y);
  return a[Math.min(a.length - 1, Math.floor((p / 100) * a.length))] ?? NaN;
};

// Warm-up as the bench does: a few requests, then 32 callers non-streaming and streaming.
for (const s of subjects) {
  await closed(s, 32, 2000);
  for (const p of ['openai', 'anthropic'] as const) await streamStep(s, p, 0, 1000);
}
// --fill-ms N: then 64 callers non-streaming for N ms on each column, as the bench's saturation steps do
// before its stream steps (they leave each keyrelay's log ~110,000 rows long).
const fillMs = Number(arg('--fill-ms', '0'));
if (fillMs > 0) for (const s of subjects) await closed(s, 64, fillMs);
// --warm ID (repeatable): one request a second to that column while it is not measured, so its log writer
// (which exits after 3 s without writes) is running when its step starts.
const warm = new Set(all('--warm'));
let measuring = '';
const warmTimer = setInterval(() => {
  for (const s of subjects)
    if (warm.has(s.id) && measuring !== s.id) void one(s, 'openai', false, '').catch(() => undefined);
}, 1000);
const summary: Record<string, { p50: number[]; p99: number[] }> = {};
/** When each column's last step ended (Date.now()): a reclaim after it came in the pause before the next. */
const lastEnd = new Map<string, number>();
for (const provider of providers) {
  for (let rep = 1; rep <= reps; rep += 1) {
    for (const s of subjects) {
      await sleep(gapMs);
      measuring = s.id;
      // Threads that appear during the step (the log writer's worker starting), by time since its start.
      const tids = (): string[] => {
        try {
          return readdirSync(`/proc/${s.pid}/task`);
        } catch {
          return [];
        }
      };
      const known = new Set(tids());
      const born: number[] = [];
      const stepStart = performance.now();
      const stepAt = Date.now();
      const watch = setInterval(() => {
        for (const t of tids()) {
          if (known.has(t)) continue;
          known.add(t);
          born.push(performance.now() - stepStart);
        }
      }, 2);
      const samples = await streamStep(s, provider, 2, durationMs);
      clearInterval(watch);
      measuring = '';
      const ttfb = samples.map((x) => x.ttfbMs);
      const p50 = pct(ttfb, 50);
      const p99 = pct(ttfb, 99);
      const k = `${provider} ${s.id}`;
      (summary[k] ??= { p50: [], p99: [] }).p50.push(p50);
      summary[k].p99.push(p99);
      // Per round (the n-th request of each caller): the slowest first byte and when it started.
      const rounds = new Map<number, Sample[]>();
      for (const x of samples) (rounds.get(x.round) ?? rounds.set(x.round, []).get(x.round)!).push(x);
      const worst = [...rounds.entries()]
        .map(([r, xs]) => `${r}:${Math.max(...xs.map((x) => x.ttfbMs)).toFixed(1)}`)
        .slice(0, 8)
        .join(' ');
      const slow = [...samples].sort((a, b) => b.ttfbMs - a.ttfbMs).slice(0, 14);
      // A column idle longer than keyrelay's quiet spell (30 s: ~4 columns at the default gap) began cold:
      // not what a step of the bench, whose columns are idle ~7–20 s, measures.
      const reclaim = s.logFile ? reclaimsBetween(s.logFile, lastEnd.get(s.id) ?? 0, stepAt)[0] : undefined;
      lastEnd.set(s.id, Date.now());
      console.log(
        `${k} rep ${rep}${reclaim ? ` (idle reclaim ${((stepAt - reclaim.at) / 1000).toFixed(1)} s before)` : ''}: n ${samples.length} p50 ${p50.toFixed(2)} p99 ${p99.toFixed(2)} max ${pct(ttfb, 100).toFixed(1)}` +
          ` | new threads at ms ${born.map((t) => t.toFixed(0)).join(',') || '-'} | round max ${worst} | 14 slowest at ms ${slow.map((x) => `${x.startMs.toFixed(0)}(r${x.round})`).join(' ')}`,
      );
    }
  }
}
const med = (xs: number[]) => pct(xs, 50);
for (const [k, v] of Object.entries(summary))
  console.log(`${k}: median p50 ${med(v.p50).toFixed(2)} ms, median p99 ${med(v.p99).toFixed(2)} ms`);

clearInterval(warmTimer);
// --settle-ms N: VmRSS of every column after N ms without requests (the bench reads it after 33 s).
const settle = Number(arg('--settle-ms', '0'));
if (settle > 0) {
  await sleep(settle);
  for (const s of subjects) {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${s.pid}/status`, 'utf8'));
    console.log(
      `${s.id}: RSS ${m ? (Number(m[1]) / 1024).toFixed(0) : '?'} MB after ${settle} ms idle, threads ${readdirSync(`/proc/${s.pid}/task`).length}`,
    );
  }
}
for (const p of pools.values()) await p.destroy();
for (const k of krs) await k.child.stop();
await bare.stop();
await upstream.stop();
compiled.remove();
rmSync(tmp, { recursive: true, force: true });

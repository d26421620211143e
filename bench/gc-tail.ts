/**
 * Where a fixed rate's slowest requests fall, second by second, beside the proxy's garbage collections.
 * One proxy (keyrelay as shipped, keyrelay with the request log off, or the bare pass-through) pinned to CPU 1
 * under `node --trace-gc`, the fake upstream on CPU 0, and an open loop from this process (run it on CPU 0):
 * after a closed-loop warm-up that opens the connections, requests follow a fixed schedule for the step and
 * each one's latency runs from its intended send time. Prints the p99 of each second, the runs of requests
 * at or over the step's p99 (when each began, how many, the worst), and every collection of the proxy's main
 * isolate over the step on the same clock: a slow run that starts with a mark-compact was the collection's.
 *
 *   nice -n -15 taskset -c 0 npx tsx bench/gc-tail.ts [keyrelay|nolog|bare] [--rate R] [--secs S] [--flag F]
 *     [--quiet S]
 *
 * Run `npm run build` first: keyrelay is started from dist/, as `npm run bench` starts it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { compileBench } from './compile.js';
import { createBenchKey, startKeyrelay } from './keyrelay.js';
import { startBenchServer, useScriptDir } from './processes.js';
import { BODIES } from './protocol.js';

const HELP = `usage: npx tsx bench/gc-tail.ts [keyrelay|nolog|bare] [--rate R] [--secs S] [--flag F] [--quiet S]
  keyrelay   keyrelay as shipped (default); nolog: KEYRELAY_REQUEST_LOG=false; bare: bench/bare-proxy.ts
  --rate R   requests/s of the open loop (default 2000)
  --secs S   length of the measured step (default 10)
  --flag F   an extra node flag for the proxy, e.g. --flag --single-threaded-gc (repeatable)
  --quiet S  seconds without traffic between the warm-up and the step (default 1): past 30, keyrelay's
             upstream connections close, its cached keys lapse and its idle collection runs, as for traffic
             that resumes after a pause (docs/performance.md)`;

/** Warm-up: enough connections and JIT that the step's first second is not the process's first load. */
const WARM_MS = 2000;
const WARM_CONCURRENCY = 64;
/** Requests at or over p99 whose due times lie this close belong to one slow run. */
const RUN_GAP_MS = 50;

interface Opts {
  target: 'keyrelay' | 'nolog' | 'bare';
  rate: number;
  secs: number;
  flags: string[];
  quietSecs: number;
}

function parse(argv: string[]): Opts {
  const o: Opts = { target: 'keyrelay', rate: 2000, secs: 10, flags: [], quietSecs: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === 'keyrelay' || a === 'nolog' || a === 'bare') o.target = a;
    else if (a === '--rate' && Number(argv[i + 1]) > 0) o.rate = Number(argv[++i]);
    else if (a === '--secs' && Number(argv[i + 1]) > 0) o.secs = Number(argv[++i]);
    else if (a === '--flag' && argv[i + 1]?.startsWith('--')) o.flags.push(argv[++i]!);
    else if (a === '--quiet' && Number(argv[i + 1]) >= 0) o.quietSecs = Number(argv[++i]);
    else {
      console.log(HELP);
      process.exit(a === '--help' ? 0 : 2);
    }
  }
  return o;
}

interface Proxy {
  origin: string;
  headers: Record<string, string>;
  /** The proxy's --trace-gc output so far. */
  output: () => string;
  /** Date.now() just before the proxy was spawned: --trace-gc's times count from its start. */
  spawnedAt: number;
  stop: () => Promise<void>;
}

async function startBare(upstream: string, flags: string[], dir: string): Promise<Proxy> {
  const spawnedAt = Date.now();
  const args = [
    '-c',
    '1',
    process.execPath,
    '--trace-gc',
    ...flags,
    join(dir, 'bare-proxy.js'),
    upstream,
    upstream,
  ];
  const proc = spawn('taskset', args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + 10_000;
  let port: RegExpExecArray | null = null;
  while (!(port = /\{"port":(\d+)\}/.exec(out))) {
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`bare proxy did not start: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    origin: `http://127.0.0.1:${port[1]}`,
    headers: {},
    output: () => out,
    spawnedAt,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill();
      }),
  };
}

async function startOurs(upstream: string, requestLog: boolean, flags: string[]): Promise<Proxy> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-gc-tail-'));
  const key = await createBenchKey(dataDir);
  const logFile = join(dataDir, 'keyrelay.log');
  const spawnedAt = Date.now();
  const kr = await startKeyrelay({
    dataDir,
    upstream,
    requestLog,
    pin: '1',
    logFile,
    nodeFlags: ['--trace-gc', ...flags],
    env: { KEYRELAY_LOG_LEVEL: 'warn' },
  });
  return {
    origin: `http://127.0.0.1:${kr.port}`,
    headers: { 'proxy-api-key': key },
    output: () => readFileSync(logFile, 'utf8'),
    spawnedAt,
    stop: async () => {
      await kr.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

interface Gc {
  /** ms since the step began */
  at: number;
  kind: string;
  pauseMs: number;
}

/**
 * The main isolate's collections from --trace-gc lines (`[pid:isolate] <ms> ms: <Kind> ..., <pause> / ...`);
 * worker threads' isolates (the log writer) print their own lines and are left out.
 */
function mainIsolateGcs(output: string, offsetMs: number): Gc[] {
  const lines = [
    ...output.matchAll(
      /^\[\d+:(0x[0-9a-f]+)\]\s+(\d+) ms: (Scavenge|Mark-Compact|Mark-Compact \(reduce\)|Minor Mark-Compact)\b[^,]*, ([\d.]+) \/ [\d.]+ ms/gm,
    ),
  ];
  const main = lines[0]?.[1];
  return lines
    .filter((m) => m[1] === main)
    .map((m) => ({ at: Number(m[2]) - offsetMs, kind: m[3]!, pauseMs: Number(m[4]) }));
}

const pct = (sorted: Float64Array | number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2));
  const compiled = compileBench();
  useScriptDir(compiled.dir);
  const up = await startBenchServer('upstream.ts', [], '0');
  const upstream = `http://127.0.0.1:${up.port}`;
  const proxy =
    o.target === 'bare'
      ? await startBare(upstream, o.flags, compiled.dir)
      : await startOurs(upstream, o.target === 'keyrelay', o.flags);
  const pool = new Pool(proxy.origin, { connections: 256 });
  const headers = { ...proxy.headers, 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
  const once = async (): Promise<void> => {
    const res = await pool.request({
      method: 'POST',
      path: '/api/proxy/openai/v1/chat/completions',
      headers,
      body: BODIES.openai.plain,
    });
    await res.body.dump();
  };
  try {
    const warmEnd = performance.now() + WARM_MS;
    await Promise.all(
      Array.from({ length: WARM_CONCURRENCY }, async () => {
        while (performance.now() < warmEnd) await once();
      }),
    );
    await new Promise((r) => setTimeout(r, o.quietSecs * 1000));

    const total = Math.round(o.rate * o.secs);
    const interval = 1000 / o.rate;
    const latency = new Float64Array(total);
    const stepWall = Date.now() + 10;
    const start = performance.now() + 10;
    await new Promise<void>((resolve, reject) => {
      let sent = 0;
      let done = 0;
      const tick = (): void => {
        const now = performance.now();
        for (; sent < total && start + sent * interval <= now; sent++) {
          const i = sent;
          const due = start + i * interval;
          once().then(() => {
            latency[i] = performance.now() - due;
            if (++done === total) resolve();
          }, reject);
        }
        if (sent < total) setImmediate(tick);
      };
      tick();
    });

    const sorted = Float64Array.from(latency).sort();
    const p99 = pct(sorted, 0.99);
    console.log(
      `${o.target}${o.flags.length ? ` ${o.flags.join(' ')}` : ''}, ${o.rate} requests/s for ${o.secs} s ` +
        `after ${o.quietSecs} s quiet: ` +
        `p50 ${pct(sorted, 0.5).toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, max ${sorted.at(-1)!.toFixed(2)} ms`,
    );
    const perSecond: string[] = [];
    for (let s = 0; s * o.rate < total; s++) {
      const second = Float64Array.from(latency.subarray(s * o.rate, (s + 1) * o.rate)).sort();
      perSecond.push(pct(second, 0.99).toFixed(1));
    }
    console.log(`p99 of each second (ms): ${perSecond.join(' ')}`);
    const runs: { at: number; n: number; worst: number }[] = [];
    for (let i = 0; i < total; i++) {
      if (latency[i]! < p99) continue;
      const at = i * interval;
      const last = runs.at(-1);
      if (last && at - last.at < RUN_GAP_MS + last.n * interval) {
        last.n++;
        last.worst = Math.max(last.worst, latency[i]!);
      } else runs.push({ at, n: 1, worst: latency[i]! });
    }
    console.log(
      `runs of requests at or over p99 (ms into the step: requests, worst ms): ` +
        runs.map((r) => `${r.at.toFixed(0)}: ${r.n}, ${r.worst.toFixed(1)}`).join('; '),
    );
    const gcs = mainIsolateGcs(proxy.output(), stepWall - proxy.spawnedAt).filter(
      (g) => g.at >= -RUN_GAP_MS && g.at <= o.secs * 1000,
    );
    const scavenges = gcs
      .filter((g) => g.kind === 'Scavenge')
      .map((g) => g.pauseMs)
      .sort((a, b) => a - b);
    console.log(
      `the proxy's main isolate over the step: ${scavenges.length} scavenges (pause p50 ` +
        `${pct(scavenges, 0.5).toFixed(2)} ms, max ${(scavenges.at(-1) ?? NaN).toFixed(2)} ms); ` +
        `mark-compacts (ms into the step: pause ms): ` +
        (gcs
          .filter((g) => g.kind !== 'Scavenge')
          .map((g) => `${g.at}: ${g.pauseMs}`)
          .join('; ') || 'none'),
    );
    console.log(
      '(--trace-gc counts from the process start, taken as the moment it was spawned: a few ms early)',
    );
  } finally {
    await pool.close();
    await proxy.stop();
    await up.stop();
    compiled.remove();
  }
}

await main();

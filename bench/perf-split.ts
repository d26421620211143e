/**
 * Where keyrelay's CPU goes, by thread and by kind of code, from on-CPU samples of every thread (Linux `perf`,
 * Debian's linux-perf): unlike the bench's stage profile (V8's --cpu-prof, main thread and writer only, wall
 * time), it counts the kernel, the C library, SQLite, V8's GC helper threads and the structured clone. Each
 * variant is a keyrelay pinned to CPU 1 (load and upstream on CPU 0), warmed, then sampled at 1,999 Hz while
 * saturated (64 connections) or, with --stream, under 64 concurrent streams of 50 chunks. Prints µs per
 * request (or stream) per thread and per kind, and the difference of each variant from the first.
 *
 *   npm run build && npx tsx bench/perf-split.ts [--seconds 5] [--stream openai] shipped: nolog:KEYRELAY_REQUEST_LOG=false
 *
 * A variant is `name:` followed by comma-separated settings (NAME=VALUE), main=DIR and node flags (--…).
 * JIT frames are named through --perf-basic-prof-only-functions; V8 reuses code addresses, so a JS name can be
 * stale (a regular expression's code reported as node:path's normalizeString, say): read kinds, not names.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileBench } from './compile.js';
import { parseVariant, startVariant } from './keyrelay.js';
import { readThreadCpuMs, startBenchServer, startDriver, useScriptDir } from './processes.js';
import type { ClosedResult, ProviderName, StreamResult } from './protocol.js';

const argv = process.argv.slice(2);
const at = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const seconds = Number(at('--seconds') ?? 5);
/** --symbols N: also the N symbols that differ most between the variants, per thread group. */
const topSymbols = Number(at('--symbols') ?? 0);
const stream = (at('--stream') ?? null) as ProviderName | null;
const variants = argv
  .filter((a, i) => a.includes(':') && !['--seconds', '--stream', '--symbols'].includes(argv[i - 1] ?? ''))
  .map(parseVariant);
if (variants.length === 0) {
  console.error(
    'usage: npx tsx bench/perf-split.ts [--seconds N] [--stream openai|anthropic] name:[SETTING=V,--flag,…] …',
  );
  process.exit(2);
}

/** The kind of code a sampled symbol belongs to; the first rule that matches wins. */
const KINDS: [string, RegExp][] = [
  ['SQLite', /sqlite|fts5|Fts5|wal[A-Z]|btree|Btree|pcache|pager|Vdbe|vdbe|balance_|cellSize/],
  ['GC', /Scaveng|Mark(ing|er|Compact)|Sweep|Heap::|Evacuat|Compact|Remembered|SlotSet|MinorGC|Concurrent/],
  ['serialize (JSON, structured clone)', /Serializ|Deserializ|Stringif|Json/],
  ['JS', /^JS:/],
  ['V8 builtins', /^Builtins_/],
  ['C library memory', /^(__mem|_int_|malloc|free|cfree|unlink_chunk)/],
];

function kindOf(symbol: string, kernel: boolean): string {
  if (kernel) return 'kernel';
  for (const [kind, re] of KINDS) if (re.test(symbol)) return kind;
  return 'other native (node, V8, libuv, addons)';
}

/** Samples per thread id and kind of code, from `perf report`; `symbols` gets each symbol's, by thread id. */
function readSamples(
  data: string,
  symbols: Map<number, Map<string, number>>,
): Map<number, Map<string, number>> {
  const text: string = execFileSync(
    'perf',
    [
      'report',
      '-i',
      data,
      '--no-children',
      '-g',
      'none',
      '--sort',
      'pid,sym',
      '-F',
      'sample,pid,sym',
      '--stdio',
    ],
    { encoding: 'utf8', maxBuffer: 256 << 20, stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const byTid = new Map<number, Map<string, number>>();
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\s+(\d+):\S+\s+\[([.k])\]\s+(.*)$/.exec(line);
    if (!m) continue;
    const tid = Number(m[2]);
    const kinds = byTid.get(tid) ?? new Map<string, number>();
    const kind = kindOf(m[4]!.trim(), m[3] === 'k');
    kinds.set(kind, (kinds.get(kind) ?? 0) + Number(m[1]));
    byTid.set(tid, kinds);
    const bySym = symbols.get(tid) ?? new Map<string, number>();
    const sym = `${m[3] === 'k' ? '[k] ' : ''}${m[4]!.trim()}`;
    bySym.set(sym, (bySym.get(sym) ?? 0) + Number(m[1]));
    symbols.set(tid, bySym);
  }
  return byTid;
}

const compiled = compileBench();
useScriptDir(compiled.dir);
const upstream = await startBenchServer('upstream.ts', [], '0');
const driver = startDriver('0');
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-perf-split-'));
const HZ = 1999;
type Split = Map<string, number>; // "thread / kind" → µs per request
const results: { name: string; n: number; split: Split; symbols: Split }[] = [];
for (const v of variants) {
  const { child, target } = await startVariant(v, {
    dataDir: join(tmp, v.name),
    upstream: `http://127.0.0.1:${upstream.port}`,
    nodeFlags: ['--perf-basic-prof-only-functions'],
  });
  const load = async (ms: number): Promise<number> =>
    stream
      ? (
          await driver.run<StreamResult>({
            kind: 'stream',
            target,
            provider: stream,
            concurrency: 64,
            durationMs: ms,
            chunks: 50,
            chunkMs: 0,
          })
        ).streams
      : (await driver.run<ClosedResult>({ kind: 'closed', target, concurrency: 64, durationMs: ms })).ok;
  await load(3000);
  const data = join(tmp, `${v.name}.data`);
  // Its own process group: Debian's /usr/bin/perf is a wrapper that runs the kernel's perf as a child, and
  // only the whole group's SIGINT has the recorder finish its file before the wrapper exits.
  const perf = spawn('perf', ['record', '-F', String(HZ), '-g', '-p', String(child.pid), '-o', data], {
    stdio: 'ignore',
    detached: true,
  });
  await new Promise((r) => setTimeout(r, 300)); // perf attaches to every thread
  const threads0 = readThreadCpuMs(child.pid);
  const n = await load(seconds * 1000);
  // The log writer is the busiest thread after the main one (with the log off, a GC helper is).
  let busiest = -1;
  let most = -1;
  for (const [tid, ms] of readThreadCpuMs(child.pid)) {
    const d = ms - (threads0.get(tid) ?? 0);
    if (tid !== child.pid && d > most) [busiest, most] = [tid, d];
  }
  const writer = v.env.KEYRELAY_REQUEST_LOG === 'false' ? 'busiest other thread' : 'log writer';
  const exited = new Promise((r) => perf.on('exit', r));
  process.kill(-perf.pid!, 'SIGINT');
  await exited;
  await child.stop();
  const split: Split = new Map();
  const symbols: Split = new Map(); // "thread: symbol" → µs per request
  const bySymbol = new Map<number, Map<string, number>>();
  const threadOf = (tid: number) => (tid === child.pid ? 'main' : tid === busiest ? 'writer' : 'other');
  for (const [tid, kinds] of readSamples(data, bySymbol)) {
    const thread = tid === child.pid ? 'main' : tid === busiest ? writer : 'other threads';
    for (const [kind, samples] of kinds) {
      const us = (samples * 1e6) / HZ / n;
      split.set(`${thread} / ${kind}`, (split.get(`${thread} / ${kind}`) ?? 0) + us);
      split.set(`${thread} (all)`, (split.get(`${thread} (all)`) ?? 0) + us);
      split.set('all threads', (split.get('all threads') ?? 0) + us);
    }
  }
  for (const [tid, syms] of bySymbol) {
    for (const [sym, samples] of syms) {
      const k = `${threadOf(tid)}: ${sym}`;
      symbols.set(k, (symbols.get(k) ?? 0) + (samples * 1e6) / HZ / n);
    }
  }
  results.push({ name: v.name, n, split, symbols });
}
driver.stop();
await upstream.stop();
compiled.remove();
rmSync(tmp, { recursive: true, force: true });

const unit = stream ? 'stream' : 'request';
console.log(
  `keyrelay pinned to CPU 1, ${stream ? `64 concurrent ${stream} streams of 50 chunks` : '64 connections'}, ` +
    `${seconds} s sampled at ${HZ} Hz; µs of CPU per ${unit} (perf, all threads)`,
);
const rows = [...new Set(results.flatMap((r) => [...r.split.keys()]))].sort((a, b) =>
  a === 'all threads' ? -1 : b === 'all threads' ? 1 : a.localeCompare(b),
);
const first = results[0]!;
const head = [
  '',
  ...results.map((r) => `${r.name} (${r.n})`),
  ...results.slice(1).map((r) => `${r.name} − ${first.name}`),
];
const cells = rows.map((row) => [
  row,
  ...results.map((r) => (r.split.get(row) ?? 0).toFixed(1)),
  ...results.slice(1).map((r) => {
    const d = (r.split.get(row) ?? 0) - (first.split.get(row) ?? 0);
    return (d >= 0 ? '+' : '') + d.toFixed(1);
  }),
]);
const widths = head.map((_, i) => Math.max(...[head, ...cells].map((c) => c[i]!.length)));
for (const c of [head, ...cells])
  console.log(c.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join('  '));

if (topSymbols > 0 && results.length > 1) {
  // Names are JIT frames' (--perf-basic-prof-only-functions) or native symbols; V8 reuses code addresses, so a
  // JS name can be stale: a lead, not a verdict.
  for (const r of results.slice(1)) {
    const keys = new Set([...first.symbols.keys(), ...r.symbols.keys()]);
    const diffs = [...keys]
      .map((k) => [k, (r.symbols.get(k) ?? 0) - (first.symbols.get(k) ?? 0)] as const)
      .sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]))
      .slice(0, topSymbols);
    console.log(`\nsymbols that differ most, ${r.name} − ${first.name} (µs per ${unit}):`);
    for (const [k, d] of diffs)
      console.log(`${(d >= 0 ? '+' : '') + d.toFixed(1)}`.padStart(8) + `  ${k.slice(0, 150)}`);
  }
}

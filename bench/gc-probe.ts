/**
 * Garbage-collection work per request of keyrelay variants at saturation: each runs under
 * `--trace-gc-nvp`, pinned like the bench (CPU 1; load and upstream on CPU 0), 64 connections for 4 s, and
 * the trace of that window is summed per isolate: the main thread's, and the log writer's worker (its own
 * heap with a 2 MB young generation: its ~0.9 MB scavenges are easy to mistake for the main thread's).
 * Repetitions rotate the variants' order. Uses the built dist/ (run `npm run build` first).
 *
 *   npx tsx bench/gc-probe.ts [--reps 3] shipped: nolog:KEYRELAY_REQUEST_LOG=false before:main=/tmp/worktree
 *
 * A variant is `name:` followed by comma-separated settings (NAME=VALUE) and optionally main=DIR (the
 * keyrelay built in DIR).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileBench } from './compile.js';
import { parseVariant, startVariant } from './keyrelay.js';
import { readThreadCpuMs, startBenchServer, startDriver, threadDelta, useScriptDir } from './processes.js';
import type { ClosedResult } from './protocol.js';
import { median } from './stats.js';

const argv = process.argv.slice(2);
const repsAt = argv.indexOf('--reps');
const reps = repsAt >= 0 ? Number(argv[repsAt + 1]) || 3 : 3;
const variants = argv.filter((a, i) => a.includes(':') && argv[i - 1] !== '--reps').map(parseVariant);
if (variants.length === 0) {
  console.error('usage: npx tsx bench/gc-probe.ts [--reps N] name:[SETTING=V,…][,main=DIR] …');
  process.exit(2);
}

interface Gc {
  scavengeMs: number;
  scavenges: number;
  markMs: number;
  marks: number;
  promotedBytes: number;
}

/**
 * Sums the window of a `--trace-gc-nvp` trace per isolate (the `[pid:0xADDR]` prefix), the main thread's
 * first: the isolate that collected first in the whole trace, before the writer's worker existed.
 */
function sumTrace(whole: string, window: string): Gc[] {
  const main = /^\[\d+:(0x[0-9a-f]+)\]/m.exec(whole)?.[1];
  const byIsolate = new Map<string, Gc>();
  if (main) byIsolate.set(main, { scavengeMs: 0, scavenges: 0, markMs: 0, marks: 0, promotedBytes: 0 });
  for (const line of window.split('\n')) {
    const m = /^\[\d+:(0x[0-9a-f]+)\].*?pause=([\d.]+).*? gc=(\w+)/.exec(line);
    if (!m) continue;
    let g = byIsolate.get(m[1]!);
    if (!g)
      byIsolate.set(m[1]!, (g = { scavengeMs: 0, scavenges: 0, markMs: 0, marks: 0, promotedBytes: 0 }));
    const pause = Number(m[2]);
    if (m[3] === 's') {
      g.scavengeMs += pause;
      g.scavenges += 1;
    } else {
      g.markMs += pause;
      g.marks += 1;
    }
    g.promotedBytes += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
  }
  return [...byIsolate.values()];
}

const compiled = compileBench();
useScriptDir(compiled.dir);
const upstream = await startBenchServer('upstream.ts', [], '0');
const driver = startDriver('0');
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-gc-probe-'));
const lines = new Map<string, { text: string; mainUs: number }[]>();
for (let rep = 0; rep < reps; rep += 1) {
  for (let i = 0; i < variants.length; i += 1) {
    const v = variants[(i + rep) % variants.length]!;
    const dataDir = join(tmp, `${v.name}-${rep}`);
    const logFile = join(dataDir, 'trace.log');
    const { child, target } = await startVariant(v, {
      dataDir,
      upstream: `http://127.0.0.1:${upstream.port}`,
      nodeFlags: ['--trace-gc-nvp'],
      logFile,
    });
    await driver.run({ kind: 'closed', target, concurrency: 32, durationMs: 1500 });
    const offset = readFileSync(logFile, 'utf8').length;
    const threads0 = readThreadCpuMs(child.pid);
    const r = await driver.run<ClosedResult>({ kind: 'closed', target, concurrency: 64, durationMs: 4000 });
    const t = threadDelta(child.pid, threads0, readThreadCpuMs(child.pid));
    await child.stop();
    const trace = readFileSync(logFile, 'utf8');
    const [main, ...workers] = sumTrace(trace, trace.slice(offset));
    const per = (ms: number) => ((ms * 1000) / r.ok).toFixed(1);
    const worker = workers.reduce((n, w) => n + w.scavengeMs + w.markMs, 0);
    const mainUs = (t.mainMs * 1000) / r.ok;
    const text =
      `${r.ok} requests; main thread ${mainUs.toFixed(0)} µs/req, other threads ${per(t.othersMs)} | ` +
      `main isolate: scavenges ${per(main?.scavengeMs ?? 0)} µs/req (${main?.scavenges ?? 0}), ` +
      `mark-compacts ${per(main?.markMs ?? 0)} (${main?.marks ?? 0}), promoted ` +
      `${(((main?.promotedBytes ?? 0) / r.ok) | 0).toString()} B/req | worker isolates: GC ${per(worker)} µs/req ` +
      `(${workers.reduce((n, w) => n + w.scavenges + w.marks, 0)})`;
    const list = lines.get(v.name) ?? [];
    list.push({ text, mainUs });
    lines.set(v.name, list);
  }
}
console.log('each keyrelay pinned to CPU 1, 64 connections for 4 s; GC pauses are wall time on that core');
for (const [name, list] of lines) {
  console.log(`${name}: main thread median ${median(list.map((l) => l.mainUs)).toFixed(0)} µs/req`);
  for (const l of list) console.log(`  ${l.text}`);
}
driver.stop();
await upstream.stop();
rmSync(tmp, { recursive: true, force: true });
compiled.remove();

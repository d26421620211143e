/**
 * A/B of node flags for keyrelay: `npm run bench:flags -- [--node PATH] [--reps N] [--pause MS] [--stream P] [--open RATE] -- <flags A> -- <flags B>`
 * (empty = none), e.g. `-- -- --max-semi-space-size=16`; a `NAME=VALUE` in a group is a setting instead, e.g.
 * `-- -- KEYRELAY_LOG_BATCH_SIZE=500`, and a `main=DIR` runs the keyrelay built in DIR instead of ours (A/B of two
 * commits: `git worktree add DIR <commit>`, link node_modules, `npm run build` there). Two keyrelays as shipped, both pinned to CPU 1,
 * saturated in turn, in alternating order (64 connections); CPU per request (/proc, all threads), throughput and RSS peak per
 * repetition, then 1,000 slow streams each for RSS. Uses the built dist/ (run `npm run build` first).
 * `--stream openai|anthropic`: the saturating load is 64 concurrent streams of 50 chunks (the bench's stream
 * step, back to back) instead of plain requests, and CPU is per stream.
 * `--open RATE`: instead of saturating, each repetition is 3 s of plain requests sent at RATE per second (open loop,
 * the bench's fixed-rate step), and the latency from each intended send time is printed, p50/p90/p99 per repetition.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileBench } from './compile.js';
import { createBenchKey, keyrelayTarget, startKeyrelay } from './keyrelay.js';
import {
  readCpuMs,
  readThreadCpuMs,
  sampleRss,
  startBenchServer,
  startDriver,
  threadDelta,
  useScriptDir,
  type Child,
} from './processes.js';
import type {
  ClosedResult,
  HoldResult,
  OpenResult,
  ProviderName,
  StreamResult,
  Summary,
  Target,
} from './protocol.js';
import { median } from './stats.js';

const argv = process.argv.slice(2);
let node = process.execPath;
let reps = 3;
/** Quiet time before each repetition: the main bench leaves a keyrelay ~20 s idle between its own. */
let pauseMs = 0;
let stream: ProviderName | null = null;
let openRate = 0;
const groups: string[][] = [];
for (let i = 0; i < argv.length; i += 1) {
  const a = argv[i]!;
  if (a === '--') groups.push([]);
  else if (groups.length > 0) groups[groups.length - 1]!.push(a);
  else if (a === '--node') node = argv[++i]!;
  else if (a === '--reps') reps = Number(argv[++i]) || 3;
  else if (a === '--pause') pauseMs = Number(argv[++i]) || 0;
  else if (a === '--stream') stream = argv[++i] as ProviderName;
  else if (a === '--open') openRate = Number(argv[++i]) || 0;
}
while (groups.length < 2) groups.push([]);

const SETTING = /^[A-Z][A-Z0-9_]*=/;
const BUILD = /^main=/;

const compiled = compileBench();
useScriptDir(compiled.dir);
const upstream = await startBenchServer('upstream.ts', [], '0');
const up = `http://127.0.0.1:${upstream.port}`;
const driver = startDriver('0');
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-bench-flags-'));
interface Subject {
  label: string;
  child: Child;
  target: Target;
  cpu: number[];
  /** µs per request on the main thread, the busiest other (the log writer) and the remaining threads. */
  threads: [number, number, number][];
  rps: number[];
  latency: Summary[];
  rss: number;
}
const subjects: Subject[] = [];
for (const [i, flags] of groups.entries()) {
  const dataDir = join(tmp, String(i));
  mkdirSync(dataDir);
  const key = await createBenchKey(dataDir);
  const child = await startKeyrelay({
    dataDir,
    upstream: up,
    requestLog: true,
    pin: '1',
    node,
    build: flags.find((f) => BUILD.test(f))?.replace(BUILD, ''),
    // NAME=VALUE in a group is a setting for that keyrelay; anything else a node flag.
    nodeFlags: flags.filter((f) => !SETTING.test(f) && !BUILD.test(f)),
    env: Object.fromEntries(
      flags.filter((f) => SETTING.test(f)).map((f) => f.split(/=(.*)/s, 2) as [string, string]),
    ),
  });
  const target = keyrelayTarget(`flags ${i}`, `http://127.0.0.1:${child.port}`, key);
  subjects.push({
    label: flags.join(' ') || '(none)',
    child,
    target,
    cpu: [],
    threads: [],
    rps: [],
    latency: [],
    rss: 0,
  });
}

/** One repetition's load on one keyrelay: requests (or streams) answered, and their rate. */
async function load(s: Subject): Promise<{ ok: number; rps: number }> {
  if (openRate) {
    const x = await driver.run<OpenResult>({
      kind: 'open',
      target: s.target,
      rate: openRate,
      durationMs: 3000,
    });
    s.latency.push(x.latency);
    return { ok: x.ok, rps: x.achievedRps };
  }
  if (stream) {
    const x = await driver.run<StreamResult>({
      kind: 'stream',
      target: s.target,
      provider: stream,
      concurrency: 64,
      durationMs: 4000,
      chunks: 50,
      chunkMs: 0,
    });
    return { ok: x.streams, rps: x.streams / 4 };
  }
  const x = await driver.run<ClosedResult>({
    kind: 'closed',
    target: s.target,
    concurrency: 64,
    durationMs: 4000,
  });
  return { ok: x.ok, rps: x.rps };
}

for (const s of subjects)
  await driver.run({ kind: 'closed', target: s.target, concurrency: 32, durationMs: 2000 });
for (let rep = 0; rep < reps; rep += 1) {
  if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  // Each goes first as often as the other: the first of a pair ran slower often enough to matter.
  for (const s of rep % 2 ? [...subjects].reverse() : subjects) {
    const cpu0 = readCpuMs(s.child.pid);
    const threads0 = readThreadCpuMs(s.child.pid);
    const stop = sampleRss(s.child.pid);
    const r = await load(s);
    s.cpu.push(((readCpuMs(s.child.pid) - cpu0) * 1000) / r.ok);
    const t = threadDelta(s.child.pid, threads0, readThreadCpuMs(s.child.pid));
    const us = (ms: number) => (ms * 1000) / r.ok;
    s.threads.push([us(t.mainMs), us(t.busiestOtherMs), us(t.othersMs - t.busiestOtherMs)]);
    s.rps.push(r.rps);
    s.rss = Math.max(s.rss, stop());
  }
}
const streams: number[] = [];
for (const s of subjects) {
  const stop = sampleRss(s.child.pid, 50);
  await driver.run<HoldResult>({
    kind: 'hold',
    target: s.target,
    provider: 'openai',
    count: 1000,
    chunks: 8,
    chunkMs: 500,
  });
  streams.push(stop());
}
console.log(
  `node ${node}; each keyrelay pinned to CPU 1; median of ${reps}` +
    (stream ? `; load: 64 concurrent ${stream} streams of 50 chunks, CPU per stream` : '') +
    (openRate ? `; load: ${openRate} requests/s, open loop, 3 s` : ''),
);
for (const [i, s] of subjects.entries()) {
  console.log(
    `${s.label.padEnd(32)} ${median(s.cpu).toFixed(0).padStart(5)} µs/req  ${median(s.rps).toFixed(0).padStart(5)} rps  ` +
      `RSS peak under load ${s.rss.toFixed(0)} MB, with 1,000 streams ${streams[i]!.toFixed(0)} MB`,
  );
  console.log(`${''.padEnd(32)} repetitions: ${s.cpu.map((c) => c.toFixed(0)).join(', ')} µs/req`);
  if (openRate) {
    const ms = (k: 'p50' | 'p90' | 'p99') => s.latency.map((l) => l[k].toFixed(2)).join(', ');
    const med = (k: 'p50' | 'p90' | 'p99') => median(s.latency.map((l) => l[k])).toFixed(2);
    console.log(`${''.padEnd(32)} latency ms, median p50 ${med('p50')} p90 ${med('p90')} p99 ${med('p99')}`);
    console.log(`${''.padEnd(32)} p50: ${ms('p50')}; p90: ${ms('p90')}; p99: ${ms('p99')}`);
  }
  const part = (k: number) => median(s.threads.map((t) => t[k]!)).toFixed(0);
  console.log(
    `${''.padEnd(32)} by thread (medians): main ${part(0)}, busiest other (the log writer) ${part(1)}, the rest ${part(2)} µs/req`,
  );
}
driver.stop();
await Promise.all([upstream.stop(), ...subjects.map((s) => s.child.stop())]);
rmSync(tmp, { recursive: true, force: true });
compiled.remove();

/**
 * `npm run bench`: the fake upstream, a bare node proxy, keyrelay (as shipped, and with the request log, body
 * logging or the full-text index off, and with a key that has limits) and the load driver, each in its own process on 127.0.0.1. Every step is repeated and interleaved across targets so a
 * slow moment hits all columns alike; the median is reported. Prints a table, writes JSON.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { idleReclaims, inspectLog, reclaimsBetween, ROOT, type LogSummary } from './keyrelay.js';
import { waitQuiet, watchOthers } from './machine.js';
import { parseOptions } from './options.js';
import { readCpuMs, readHeapMb, readRssMb, readThreadCpuMs, threadDelta } from './processes.js';
import { summarizeProfiles } from './profile-summary.js';
import type { ClosedResult, StreamResult } from './protocol.js';
import { aggregate, evaluate, renderFooter, renderTargetTable, renderTable, type Raw } from './report.js';
import {
  measureHold,
  measureOpen,
  measureSaturation,
  measureStream,
  type Row,
  type Subject,
  type SubjectId,
} from './scenarios.js';
import { removeDirs, startAll } from './setup.js';
import { summarizeStages, type StageSummary } from './stages.js';

// --views is its own bench (bench/views.ts), with its own options: the rest of the run is not started.
if (process.argv.includes('--views')) {
  const args = process.argv.slice(2).filter((a) => a !== '--views');
  const views = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/views.ts'), ...args], {
    stdio: 'inherit',
  });
  process.exit(views.status ?? 1);
}
const opts = parseOptions(process.argv.slice(2));
const started = new Date();
const stamp = started.toISOString().replace(/[:.]/g, '-');
const resultsDir = join(ROOT, 'bench/results');
mkdirSync(resultsDir, { recursive: true });
const profileDir = opts.profile ? join(resultsDir, `prof-${stamp}`) : undefined;
const log = (msg: string): void => void process.stderr.write(`[bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const setup = await startAll(opts, { logPrefix: join(resultsDir, stamp), profileDir }, log);
const { driver, subjects } = setup;
const proxies = subjects.filter((s) => s.id !== 'direct');
const ours = (): number[] => [process.pid, driver.pid, ...setup.children.map((c) => c.pid)];
const raw: Raw = {};
const others: number[] = [];
const memory: Partial<Record<SubjectId, Row>> = {};
const died: Partial<Record<SubjectId, string>> = {};
/** When each subject's measured steps began (Date.now()): an idle reclaim before one of them colours it. */
const stepStarts: Partial<Record<SubjectId, number[]>> = {};

/** Waits for a quiet machine, runs one step, files its row under `scenario`; null if the target died. */
async function step(scenario: string, s: Subject, fn: () => Promise<Row>): Promise<Row | null> {
  const gone = s.exited();
  if (gone) {
    if (!died[s.id]) log(`${s.id} is not running (${gone.slice(0, 300)}); skipping its steps`);
    died[s.id] = gone;
    return null;
  }
  // Short: on a machine that is never quiet, waiting longer only makes the run long.
  await waitQuiet(ours, 0.25, opts.quick ? 600 : 1000);
  const stop = watchOthers(ours);
  (stepStarts[s.id] ??= []).push(Date.now());
  const row = await fn();
  row.others_cores = stop();
  others.push(row.others_cores);
  ((raw[scenario] ??= {})[s.id] ??= []).push(row);
  return row;
}

function show(label: string, r: Row | null, fields: string[]): void {
  const values = fields.map((f) => `${f} ${typeof r?.[f] === 'number' ? r[f].toFixed(2) : '—'}`);
  log(`${label}: ${r === null ? 'skipped' : values.join(' ')}`);
}

async function snapshotMemory(s: Subject, when: string): Promise<void> {
  const row = (memory[s.id] ??= {});
  row[`rss_${when}_mb`] = s.exited() ? null : readRssMb(s.pid);
  const heap = await readHeapMb(s.target.origin);
  row[`heap_${when}_mb`] = heap.heap_used_mb;
  row[`external_${when}_mb`] = heap.external_mb;
}

/** `concurrency` callers for `ms`, non-streaming, then streaming on both providers: JIT and pools warm. */
async function warmUp(s: Subject, concurrency: number, ms: number): Promise<void> {
  const w = await driver.run<ClosedResult>({ kind: 'closed', target: s.target, concurrency, durationMs: ms });
  s.sent += w.ok + w.errors;
  if (w.errors > 0 || ms >= 1000) log(`warm-up ${s.id}: ${Math.round(w.rps)} rps, ${w.errors} errors`);
  for (const provider of ['openai', 'anthropic'] as const) {
    const job = { kind: 'stream', target: s.target, provider, concurrency, durationMs: ms / 2 } as const;
    const r = await driver.run<StreamResult>({ ...job, chunks: opts.streamChunks, chunkMs: 0 });
    s.sent += r.streams + r.errors;
  }
}

for (const s of proxies) await snapshotMemory(s, 'start');
log('warming up…');
// Idle: started, a few requests served (lazy set-up done), then left alone; before any real load.
for (const s of subjects) await warmUp(s, 1, 300);
log(`idle ${opts.quietMs} ms…`);
await sleep(opts.quietMs);
for (const s of proxies) await snapshotMemory(s, 'idle');
for (const s of subjects) await warmUp(s, 32, opts.warmupMs);

for (const rate of opts.rates) {
  for (let rep = 1; rep <= opts.reps; rep += 1) {
    for (const s of subjects) {
      const row = await step(`open_${rate}`, s, () => measureOpen(driver, s, rate, opts.openMs));
      show(`open ${rate} rps rep ${rep} ${s.id}`, row, ['p50', 'p90', 'p99', 'errors', 'others_cores']);
    }
  }
}
for (let rep = 1; rep <= opts.reps; rep += 1) {
  for (const s of subjects) {
    const row = await step('saturation', s, () =>
      measureSaturation(driver, s, opts.saturationConcurrency, opts.saturationMs),
    );
    show(`saturation rep ${rep} ${s.id}`, row, [
      'rps',
      'cpu_us_per_req',
      'p99',
      'eld_p99_ms',
      'errors',
      'others_cores',
    ]);
    const m = memory[s.id];
    if (m && row) m.rss_load_mb = Math.max(m.rss_load_mb ?? 0, row.rss_peak_mb ?? 0);
  }
}
for (const provider of ['openai', 'anthropic'] as const) {
  for (const c of opts.streamConcurrency) {
    for (let rep = 1; rep <= opts.reps; rep += 1) {
      for (const s of subjects.filter((x) => x.streams)) {
        const row = await step(`stream_${provider}_c${c}`, s, () =>
          measureStream(driver, s, provider, c, opts.streamMs, opts.streamChunks, opts.streamChunkMs),
        );
        show(`stream ${provider} c=${c} rep ${rep} ${s.id}`, row, [
          'ttfb_p50',
          'ttfb_p99',
          'ttlb_p50',
          'errors',
        ]);
      }
    }
  }
}
for (const s of proxies.filter((x) => x.full && !opts.stagesOnly)) {
  const row = await step('hold', s, () =>
    measureHold(driver, s, opts.slowStreams, opts.slowChunks, opts.slowChunkMs),
  );
  show(`${opts.slowStreams} slow streams ${s.id}`, row, [
    'rss_streams_mb',
    'heap_used_mb',
    'external_mb',
    'opened',
    'completed',
    'errors',
  ]);
  const m = (memory[s.id] ??= {});
  m.rss_streams_mb = row?.rss_streams_mb ?? null;
  m.rss_before_streams_mb = row?.rss_before_mb ?? null;
  m.heap_streams_mb = row?.heap_used_mb ?? null;
  m.external_streams_mb = row?.external_mb ?? null;
}
const loadEnded = Date.now();
// The per-stage profile: a separate keyrelay under --cpu-prof (profiling slows what it measures, so never
// the measured one), saturated like the saturation step; only samples inside that window count.
let stages: StageSummary | null = null;
let stagesCpuUsPerReq: number | null = null;
if (opts.stages && setup.startProfiled) {
  const dir = join(resultsDir, `stages-${stamp}`);
  log('per-stage profile: a profiled keyrelay, saturated…');
  const { subject: ps, child } = await setup.startProfiled(dir);
  await warmUp(ps, 32, opts.warmupMs);
  await waitQuiet(ours, 0.25, 1000);
  const from = Number(process.hrtime.bigint() / 1000n);
  const cpu0 = readCpuMs(ps.pid);
  const threads0 = readThreadCpuMs(ps.pid);
  const r = await driver.run<ClosedResult>({
    kind: 'closed',
    target: ps.target,
    concurrency: opts.saturationConcurrency,
    durationMs: opts.stageMs,
  });
  stagesCpuUsPerReq = r.ok ? Math.round(((readCpuMs(ps.pid) - cpu0) * 1000) / r.ok) : null;
  const t = threadDelta(ps.pid, threads0, readThreadCpuMs(ps.pid));
  const us = (ms: number): number => (r.ok ? Math.round((ms * 1000) / r.ok) : 0);
  const threadCpu = {
    mainUs: us(t.mainMs),
    otherThreadsUs: us(t.othersMs),
  };
  const to = Number(process.hrtime.bigint() / 1000n);
  await child.stop(); // --cpu-prof writes its files at exit
  stages = summarizeStages(dir, r.ok, from, to, r.ok ? threadCpu : null);
  log(`per-stage profile: ${Math.round(r.rps)} rps under the profiler, ${r.errors} errors`);
}

log(`settling ${opts.quietMs} ms…`);
await sleep(opts.quietMs);
for (const s of proxies) await snapshotMemory(s, 'after');
const afterRead = Date.now();
// "RSS after load" is read once the idle reclaim should have run (30 s quiet): say when each one's last did.
const reclaims = proxies
  .filter((s) => s.id.startsWith('keyrelay'))
  .map((s) => {
    const file = join(resultsDir, `${stamp}-${s.id}.log`);
    const last = idleReclaims(file)
      .filter((r) => r.at <= afterRead)
      .at(-1);
    // One between two of the subject's steps (idle 30 s: a slow machine's long steps) made the later step
    // start cold: not the warm process the targets are about.
    const starts = stepStarts[s.id] ?? [];
    const during = starts.slice(1).reduce((n, t, i) => n + reclaimsBetween(file, starts[i]!, t).length, 0);
    return (
      (last
        ? `${s.id} ${((afterRead - last.at) / 1000).toFixed(0)} s before it (${last.reason}, ${last.ms.toFixed(0)} ms)`
        : `${s.id} none`) + `, ${during} before one of its measured steps`
    );
  });
for (const [id, row] of Object.entries(memory)) (raw.memory ??= {})[id as SubjectId] = [row];

await setup.teardown();
const logRows: Record<string, { sent: number; log: LogSummary | null }> = {};
for (const s of subjects) {
  const dir = setup.dataDirs[s.id];
  if (dir) logRows[s.id] = { sent: s.sent, log: inspectLog(dir) };
}
removeDirs(Object.values(setup.dataDirs));
const profile = profileDir ? summarizeProfiles(profileDir, 25) : null;

const results = aggregate(raw);
const checks = evaluate(results);
const othersMedian = [...others].sort((a, b) => a - b)[others.length >> 1] ?? 0;
const report = {
  meta: {
    started: started.toISOString(),
    seconds: Math.round((Date.now() - started.getTime()) / 1000),
    commit: gitCommit(),
    node: process.version,
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? null,
    loadavg_end: loadavg(),
    other_processes_cores_median: othersMedian,
    options: opts,
    keyrelay_error: setup.keyrelayError,
    build_warning: setup.buildWarning,
    died,
  },
  results,
  checks,
  log_rows: logRows,
  profile,
  stages,
  raw,
};
const outFile = opts.out ?? join(resultsDir, `${stamp}.json`);
writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);
console.log(
  renderTable(
    results,
    checks,
    opts.rates,
    subjects.map((s) => s.id),
  ),
);
console.log(renderFooter(report.meta, logRows, results, profile?.text ?? null));
console.log(`\n${renderTargetTable(results, opts.pin)}`);
if (reclaims.length > 0)
  console.log(
    `"RSS after load" was read ${((afterRead - loadEnded) / 1000).toFixed(0)} s after the bench's last load ` +
      `(keyrelay's 1,000 slow streams). Each keyrelay's last idle reclaim (src/cli/memory.ts) before that ` +
      `reading: ${reclaims.join('; ')}.`,
  );
if (stages) {
  console.log(
    `\nPer-stage CPU profile of keyrelay at saturation (${opts.saturationConcurrency} connections; a separate` +
      ` profiled process, ${stagesCpuUsPerReq ?? '—'} µs/req CPU by /proc incl. profiler overhead):`,
  );
  console.log(stages.text);
}
console.log(`\nJSON: ${outFile}`);

// The WebSocket scenario (bench/websocket.ts: beside a bare ws relay), in its own processes, after the above;
// only with --ws (or `npm run bench:ws` alone), to keep the HTTP run within a few minutes.
if (opts.keyrelay && opts.ws) {
  execFileSync(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'bench/websocket.ts'), ...(opts.quick ? ['--quick'] : [])],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
}

function gitCommit(): string | null {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', 'src'], { cwd: ROOT }).toString().trim();
    return dirty ? `${head}+dirty` : head;
  } catch {
    return null;
  }
}

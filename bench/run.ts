/**
 * `npm run bench`: the fake upstream, a bare node proxy, keyrelay (request log on, and off) and the load
 * driver, each in its own process on 127.0.0.1. Every step is repeated and interleaved across targets so a
 * slow moment hits all columns alike; the median is reported. Prints a table, writes JSON.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { buildServer, countLogRows, createBenchKey, hasKeyrelaySource, ROOT, startKeyrelay } from './keyrelay.js';
import { waitQuiet, watchOthers } from './machine.js';
import { parseOptions } from './options.js';
import { compileBench } from './compile.js';
import { readRssMb, startBenchServer, startDriver, useScriptDir, type Child } from './processes.js';
import { summarizeProfiles } from './profile-summary.js';
import type { ClosedResult, StreamResult, Target } from './protocol.js';
import { aggregate, evaluate, renderTable, type Raw, type Row } from './report.js';
import { measureHold, measureOpen, measureSaturation, measureStream, type Subject, type SubjectId } from './scenarios.js';

const opts = parseOptions(process.argv.slice(2));
const started = new Date();
const log = (msg: string): void => void process.stderr.write(`[bench] ${msg}\n`);
const pinProxy = opts.pin ? '1' : undefined;
const pinLoad = opts.pin ? '0' : undefined;

function makeTarget(id: SubjectId, origin: string, prefix: string, key?: string): Target {
  const proxy: Record<string, string> = key ? { 'proxy-api-key': key } : {};
  return {
    name: id,
    origin,
    paths: { openai: `${prefix}/openai/v1/chat/completions`, anthropic: `${prefix}/anthropic/v1/messages` },
    headers: {
      openai: { ...proxy, authorization: 'Bearer sk-bench' },
      anthropic: { ...proxy, 'x-api-key': 'sk-ant-bench', 'anthropic-version': '2023-06-01' },
    },
  };
}

const compiled = compileBench();
useScriptDir(compiled.dir);
const children: Child[] = [];
const upstream = await startBenchServer('upstream.ts', [], pinLoad);
children.push(upstream);
const upOrigin = `http://127.0.0.1:${upstream.port}`;
const driver = startDriver(pinLoad);
const bare = await startBenchServer('bare-proxy.ts', [upOrigin, upOrigin], pinProxy);
children.push(bare);

const subjects: Subject[] = [
  { id: 'direct', target: { ...makeTarget('direct', upOrigin, ''), paths: { openai: '/v1/chat/completions', anthropic: '/v1/messages' } }, pid: upstream.pid, sent: 0, full: true, exited: upstream.exited },
  { id: 'bare', target: makeTarget('bare', `http://127.0.0.1:${bare.port}`, '/api/proxy'), pid: bare.pid, sent: 0, full: true, exited: bare.exited },
];

let keyrelayError: string | null = null;
let buildWarning: string | null = null;
const dataDirs: Partial<Record<SubjectId, string>> = {};
const stamp = started.toISOString().replace(/[:.]/g, '-');
const resultsDir = join(ROOT, 'bench/results');
mkdirSync(resultsDir, { recursive: true });
const profileDir = opts.profile ? join(resultsDir, `prof-${stamp}`) : undefined;
if (opts.keyrelay && !hasKeyrelaySource()) keyrelayError = 'src/cli/main.ts does not exist yet';
else if (opts.keyrelay) {
  try {
    if (opts.build) {
      log('building the server (tsc -p tsconfig.build.json)…');
      buildWarning = await buildServer();
      if (buildWarning) log(buildWarning);
    }
    const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-bench-'));
    for (const [id, requestLog] of [['keyrelay', true], ['keyrelay_nolog', false]] as const) {
      const dataDir = join(tmp, id);
      mkdirSync(dataDir);
      dataDirs[id] = dataDir;
      const key = await createBenchKey(dataDir);
      const logFile = join(resultsDir, `${stamp}-${id}.log`);
      const kr = await startKeyrelay({ dataDir, upstream: upOrigin, requestLog, pin: pinProxy, profileDir: requestLog ? profileDir : undefined, logFile });
      children.push(kr);
      subjects.push({ id, target: makeTarget(id, `http://127.0.0.1:${kr.port}`, '/api/proxy', key), pid: kr.pid, sent: 0, full: requestLog, exited: kr.exited });
    }
  } catch (err) {
    keyrelayError = err instanceof Error ? err.message : String(err);
  }
}
if (keyrelayError) log(`keyrelay not measured: ${keyrelayError.slice(0, 400)}`);

const ours = (): number[] => [process.pid, driver.pid, ...children.map((c) => c.pid)];
const raw: Raw = {};
const others: number[] = [];
const memory: Partial<Record<SubjectId, Row>> = {};
const proxies = subjects.filter((s) => s.id !== 'direct');

/** Waits for a quiet machine, runs one step, files its row under `scenario`. */
const died: Partial<Record<SubjectId, string>> = {};
async function step(scenario: string, s: Subject, fn: () => Promise<Row>): Promise<Row | null> {
  const gone = s.exited();
  if (gone) {
    if (!died[s.id]) log(`${s.id} is not running (${gone.slice(0, 300)}); skipping its steps`);
    died[s.id] = gone;
    return null;
  }
  await waitQuiet(ours, 0.25, opts.quick ? 1500 : 5000);
  const stop = watchOthers(ours);
  const row = await fn();
  row.others_cores = stop();
  others.push(row.others_cores);
  ((raw[scenario] ??= {})[s.id] ??= []).push(row);
  return row;
}
const show = (r: Row | null, fields: string[]): string =>
  r === null ? 'skipped' : fields.map((f) => `${f} ${typeof r[f] === 'number' ? r[f].toFixed(2) : '—'}`).join(' ');

for (const s of proxies) memory[s.id] = { rss_start_mb: readRssMb(s.pid) };
log('warming up…');
for (const s of subjects) {
  const w = await driver.run<ClosedResult>({ kind: 'closed', target: s.target, concurrency: 32, durationMs: opts.warmupMs });
  log(`warm-up ${s.id}: ${Math.round(w.rps)} rps, ${w.errors} errors`);
  s.sent += w.ok + w.errors;
  for (const provider of ['openai', 'anthropic'] as const) {
    const r = await driver.run<StreamResult>({ kind: 'stream', target: s.target, provider, concurrency: 8, durationMs: opts.warmupMs / 2, chunks: opts.streamChunks, chunkMs: 0 });
    s.sent += r.streams + r.errors;
  }
}
await new Promise((r) => setTimeout(r, 1500));
for (const s of proxies) memory[s.id]!.rss_idle_mb = readRssMb(s.pid);

for (const rate of opts.rates) {
  for (let rep = 1; rep <= opts.reps; rep += 1) {
    for (const s of subjects) {
      const row = await step(`open_${rate}`, s, () => measureOpen(driver, s, rate, opts.openMs));
      log(`open ${rate} rps rep ${rep} ${s.id}: ${show(row, ['p50', 'p90', 'p99', 'errors'])}`);
    }
  }
}
for (let rep = 1; rep <= opts.reps; rep += 1) {
  for (const s of subjects) {
    const row = await step('saturation', s, () => measureSaturation(driver, s, opts.saturationConcurrency, opts.saturationMs));
    log(`saturation rep ${rep} ${s.id}: ${show(row, ['rps', 'cpu_us_per_req', 'p99', 'eld_p99_ms', 'errors'])}`);
    if (memory[s.id] && row) memory[s.id]!.rss_load_mb = Math.max(memory[s.id]!.rss_load_mb ?? 0, row.rss_peak_mb ?? 0);
  }
}
for (const provider of ['openai', 'anthropic'] as const) {
  for (const c of opts.streamConcurrency) {
    for (let rep = 1; rep <= opts.reps; rep += 1) {
      for (const s of subjects.filter((x) => x.full)) {
        const row = await step(`stream_${provider}_c${c}`, s, () =>
          measureStream(driver, s, provider, c, opts.streamMs, opts.streamChunks, opts.streamChunkMs),
        );
        log(`stream ${provider} c=${c} rep ${rep} ${s.id}: ${show(row, ['ttfb_p50', 'ttfb_p99', 'ttlb_p50', 'errors'])}`);
      }
    }
  }
}
for (const s of proxies.filter((x) => x.full)) {
  const row = await step('hold', s, () => measureHold(driver, s, opts.slowStreams, opts.slowChunks, opts.slowChunkMs));
  log(`${opts.slowStreams} slow streams ${s.id}: ${show(row, ['rss_streams_mb', 'opened', 'completed', 'errors', 'open_ms'])}`);
  memory[s.id]!.rss_streams_mb = row?.rss_streams_mb ?? null;
}
log(`settling ${opts.settleMs} ms…`);
await new Promise((r) => setTimeout(r, opts.settleMs));
for (const s of proxies) memory[s.id]!.rss_after_mb = s.exited() ? null : readRssMb(s.pid);
for (const [id, row] of Object.entries(memory)) (raw.memory ??= {})[id as SubjectId] = [row];

driver.stop();
await Promise.all(children.map((c) => c.stop()));

const logRows: Record<string, { sent: number; rows: number | null }> = {};
for (const s of subjects) {
  const dir = dataDirs[s.id];
  if (dir) logRows[s.id] = { sent: s.sent, rows: countLogRows(dir) };
}
const profile = profileDir ? summarizeProfiles(profileDir, 25) : null;
for (const dir of Object.values(dataDirs)) rmSync(dir, { recursive: true, force: true });

const results = aggregate(raw);
const checks = evaluate(results);
const commit = (() => {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return null;
  }
})();
const othersMedian = [...others].sort((a, b) => a - b)[others.length >> 1] ?? 0;
const report = {
  meta: {
    started: started.toISOString(),
    seconds: Math.round((Date.now() - started.getTime()) / 1000),
    commit,
    node: process.version,
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? null,
    loadavg_end: loadavg(),
    other_processes_cores_median: othersMedian,
    options: opts,
    keyrelay_error: keyrelayError,
    build_warning: buildWarning,
    died,
  },
  results,
  checks,
  log_rows: logRows,
  profile,
  raw,
};
const outFile = opts.out ?? join(resultsDir, `${stamp}.json`);
mkdirSync(join(outFile, '..'), { recursive: true });
writeFileSync(outFile, `${JSON.stringify(report, null, 2)}\n`);

console.log(renderTable(results, checks, opts.rates, subjects.map((s) => s.id)));
console.log(
  '\n* CPU per request: the fake upstream for "direct", the proxy process otherwise. "added" = keyrelay − direct.' +
    `\n  Latency runs from the intended send time (open loop). Median of ${opts.reps} repetition(s).`,
);
for (const [id, { sent, rows }] of Object.entries(logRows)) {
  console.log(`request log ${id}: ${rows === null ? 'no SQLite request table found' : `${rows} rows`} for ${sent} requests sent`);
}
if (results.saturation?.keyrelay && results.saturation.keyrelay.eld_p99_ms === null) {
  console.log('event-loop delay: keyrelay /metrics has no nodejs_eventloop_lag_p99_seconds (not measured)');
}
if (othersMedian > 0.25) console.log(`warning: other processes used ${othersMedian.toFixed(2)} cores during steps: numbers are noisy`);
for (const [id, why] of Object.entries(died)) console.log(`${id} DIED during the run: ${why.slice(0, 600)}`);
if (buildWarning) console.log(`WARNING: ${buildWarning.split('\n')[0]}`);
if (keyrelayError) console.log(`keyrelay not measured: ${keyrelayError.slice(0, 300)}`);
if (profile) console.log(`\nkeyrelay CPU profile, top self time:\n${profile.text}`);
console.log(`\nJSON: ${outFile}`);
compiled.remove();

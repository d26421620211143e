/** One measurement step per function; each returns a flat record of numbers for one repetition. */
import type { ClosedResult, HoldResult, OpenResult, ProviderName, StreamResult, Target } from './protocol.js';
import {
  readCpuMs,
  readHeapMb,
  readLoopDelayP99Ms,
  readRssMb,
  readThreadCpuMs,
  sampleRss,
  threadDelta,
  type Driver,
} from './processes.js';
import { round } from './stats.js';
import { sampleThreads, tailAccount } from './tail.js';

export type SubjectId =
  | 'direct'
  | 'bare'
  | 'keyrelay'
  | 'keyrelay_nolog'
  | 'keyrelay_nobody'
  | 'keyrelay_nosearch'
  | 'keyrelay_limits'
  | 'keyrelay_otel'
  | 'keyrelay_baseline';

/** One column of the table: where requests go and which process's CPU and memory count. */
export interface Subject {
  id: SubjectId;
  target: Target;
  /** The process measured: the fake upstream for `direct`, the proxy otherwise. */
  pid: number;
  /** Requests sent to it in total, to check every one reached keyrelay's log. */
  sent: number;
  /** Streams and memory steps run for it too (not only latency and throughput). */
  full: boolean;
  /** The stream steps run for it (every `full` subject, and keyrelay with its log off). */
  streams: boolean;
  /** Null while its process runs; otherwise why it stopped. */
  exited: () => string | null;
}

export type Row = Record<string, number | null>;

export async function measureOpen(d: Driver, s: Subject, rate: number, ms: number): Promise<Row> {
  const stopSampling = s.id === 'direct' ? null : sampleThreads(s.pid);
  const r = await d.run<OpenResult>({ kind: 'open', target: s.target, rate, durationMs: ms });
  const tail = stopSampling ? tailAccount(s.pid, stopSampling(), r.slowest) : null;
  s.sent += r.sent;
  const pct = (x: number | undefined): number | null => (x === undefined ? null : round(x * 100, 1));
  return {
    // Shares of wall time (%) in the slowest 1 %'s windows and over the whole step (tail.ts).
    tail_main_run_pct: pct(tail?.slowest.mainRun),
    tail_main_wait_pct: pct(tail?.slowest.mainWait),
    tail_writer_run_pct: pct(tail?.slowest.writerRun),
    tail_others_run_pct: pct(tail?.slowest.othersRun),
    all_main_run_pct: pct(tail?.all.mainRun),
    all_main_wait_pct: pct(tail?.all.mainWait),
    all_writer_run_pct: pct(tail?.all.writerRun),
    all_others_run_pct: pct(tail?.all.othersRun),
    p50: r.latency.p50,
    p90: r.latency.p90,
    p99: r.latency.p99,
    max: r.latency.max,
    service_p50: r.service.p50,
    service_p99: r.service.p99,
    schedule_lag_p99: r.scheduleLag.p99,
    achieved_rps: r.achievedRps,
    errors: r.errors,
    driver_cpu: r.driver.cpuShare,
  };
}

export async function measureSaturation(
  d: Driver,
  s: Subject,
  concurrency: number,
  ms: number,
): Promise<Row> {
  await readLoopDelayP99Ms(s.target.origin); // prom-client resets its histogram on each read
  const cpu0 = readCpuMs(s.pid);
  const threads0 = readThreadCpuMs(s.pid);
  const stopRss = sampleRss(s.pid);
  const r = await d.run<ClosedResult>({ kind: 'closed', target: s.target, concurrency, durationMs: ms });
  // /proc/<pid>/stat: utime + stime of every thread of the process, over exactly the measured window.
  const cpu = readCpuMs(s.pid) - cpu0;
  const threads = threadDelta(s.pid, threads0, readThreadCpuMs(s.pid));
  const perReq = (msUsed: number): number | null => (r.ok ? (msUsed * 1000) / r.ok : null);
  const rssPeak = stopRss();
  s.sent += r.ok + r.errors;
  return {
    rps: r.rps,
    cpu_us_per_req: r.ok ? (cpu * 1000) / r.ok : null,
    // Throughput one whole core would give: robust to other load on a shared machine, unlike rps.
    rps_per_core: r.ok && cpu > 0 ? (r.ok * 1000) / cpu : null,
    cpu_cores: cpu / ms,
    main_thread_us_per_req: perReq(threads.mainMs),
    other_threads_us_per_req: perReq(threads.othersMs),
    busiest_other_thread_us_per_req: perReq(threads.busiestOtherMs),
    p50: r.latency.p50,
    p99: r.latency.p99,
    eld_p99_ms: await readLoopDelayP99Ms(s.target.origin),
    rss_peak_mb: rssPeak,
    errors: r.errors,
    driver_cpu: r.driver.cpuShare,
  };
}

export async function measureStream(
  d: Driver,
  s: Subject,
  provider: ProviderName,
  concurrency: number,
  ms: number,
  chunks: number,
  chunkMs: number,
): Promise<Row> {
  const cpu0 = readCpuMs(s.pid);
  const t0 = performance.now();
  const r = await d.run<StreamResult>({
    kind: 'stream',
    target: s.target,
    provider,
    concurrency,
    durationMs: ms,
    chunks,
    chunkMs,
  });
  // Over the whole step: a first byte waits for whatever else holds the proxy's core, so its p99 follows
  // how busy that core was (a burst of 64 arrives while the last burst's chunks and rows are handled).
  const cpu = readCpuMs(s.pid) - cpu0;
  const wall = performance.now() - t0;
  s.sent += r.streams + r.errors;
  return {
    cpu_us_per_stream: r.streams ? (cpu * 1000) / r.streams : null,
    cpu_cores: wall > 0 ? cpu / wall : null,
    ttfb_p50: r.ttfb.p50,
    ttfb_p99: r.ttfb.p99,
    ttlb_p50: r.ttlb.p50,
    ttlb_p99: r.ttlb.p99,
    streams: r.streams,
    errors: r.errors,
    reads_per_stream: r.chunksPerStream,
    driver_cpu: r.driver.cpuShare,
  };
}

/** Holds `count` slow streams open at once; RSS is the peak while they are open. */
export async function measureHold(
  d: Driver,
  s: Subject,
  count: number,
  chunks: number,
  chunkMs: number,
): Promise<Row> {
  const rssBefore = readRssMb(s.pid);
  const stopRss = sampleRss(s.pid, 50);
  let rssAllOpen: number | null = null;
  let heap: Promise<Row> = Promise.resolve({});
  const r = await d.run<HoldResult>(
    { kind: 'hold', target: s.target, provider: 'openai', count, chunks, chunkMs },
    () => {
      rssAllOpen = readRssMb(s.pid);
      heap = readHeapMb(s.target.origin);
    },
  );
  s.sent += count;
  return {
    rss_streams_mb: stopRss(),
    rss_before_mb: rssBefore,
    rss_all_open_mb: rssAllOpen,
    ...(await heap),
    opened: r.opened,
    completed: r.completed,
    errors: r.errors,
    open_ms: round(r.openMs, 1),
  };
}

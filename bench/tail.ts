/**
 * Where the slowest requests' time goes, thread by thread. While an open-loop step runs, the proxy's threads'
 * scheduler statistics (/proc/<pid>/task/<tid>/schedstat: nanoseconds run, and waited runnable for the CPU)
 * are sampled every few milliseconds; the driver reports when each of the slowest 1 % was due and how long
 * it took. Over those windows, and over the whole step for comparison: how much of the time the main thread
 * ran, how much it was ready but waited for the core, and how much the log writer and the other threads
 * (GC helpers, libuv) ran on it. A tail the writer causes shows as main-thread waiting while the writer
 * runs; one the main thread causes (a collection, a burst of work) as the main thread running.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { SlowRequest } from './protocol.js';

/**
 * Short enough that a p99 request (a few ms) spans a sample or two; long enough that reading the proxy's
 * dozen threads' files costs the sampling core (the load's, not the proxy's: setup.ts pins the bench) ~2 %.
 */
const SAMPLE_EVERY_MS = 5;
/** Threads come and go (the writer starts on the first write, libuv's pool on first use): re-listed this often. */
const RELIST_EVERY_MS = 100;

interface Sample {
  /** Epoch milliseconds, sub-millisecond (timeOrigin + now: the driver's clock, in another process). */
  at: number;
  /** tid → [ns run, ns waited on the run queue] since the thread started. */
  threads: Map<number, [number, number]>;
}

function readSchedstat(pid: number, tid: number): [number, number] | null {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ');
    return [Number(run), Number(wait)];
  } catch {
    return null; // the thread ended
  }
}

function listThreads(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [];
  }
}

/** Starts sampling `pid`'s threads; the returned function stops and hands over the samples. */
export function sampleThreads(pid: number): () => Sample[] {
  const samples: Sample[] = [];
  let tids = listThreads(pid);
  let listedAt = performance.now();
  const take = (): void => {
    if (performance.now() - listedAt > RELIST_EVERY_MS) {
      tids = listThreads(pid);
      listedAt = performance.now();
    }
    const threads = new Map<number, [number, number]>();
    for (const tid of tids) {
      const s = readSchedstat(pid, tid);
      if (s) threads.set(tid, s);
    }
    samples.push({ at: performance.timeOrigin + performance.now(), threads });
  };
  take();
  const timer = setInterval(take, SAMPLE_EVERY_MS);
  return () => {
    clearInterval(timer);
    take();
    return samples;
  };
}

/** Shares of wall time, 0–1 (the threads share one core when pinned, so the four can add up to about 1). */
export interface ThreadShares {
  mainRun: number;
  mainWait: number;
  writerRun: number;
  othersRun: number;
}

/**
 * The per-thread account of `windows` (the slowest requests) and of the whole sampled span. The log writer
 * is the busiest thread after the main one over the span (what bench/stages.ts calls it too); for a proxy
 * without one, that row is its busiest helper thread.
 */
export function tailAccount(
  pid: number,
  samples: Sample[],
  windows: readonly SlowRequest[],
): { slowest: ThreadShares; all: ThreadShares } | null {
  if (samples.length < 2 || windows.length === 0) return null;
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  const runOver = (tid: number): number =>
    (last.threads.get(tid)?.[0] ?? 0) - (first.threads.get(tid)?.[0] ?? 0);
  const others = [...last.threads.keys()].filter((tid) => tid !== pid);
  const writer = others.reduce<number | null>(
    (best, tid) => (best === null || runOver(tid) > runOver(best) ? tid : best),
    null,
  );

  /** ns each thread class used between two samples. */
  const between = (a: Sample, b: Sample): ThreadShares => {
    const d = (tid: number, i: 0 | 1): number => {
      const to = b.threads.get(tid);
      const from = a.threads.get(tid);
      return to ? to[i] - (from?.[i] ?? 0) : 0;
    };
    let othersRun = 0;
    for (const tid of b.threads.keys()) if (tid !== pid && tid !== writer) othersRun += d(tid, 0);
    return {
      mainRun: d(pid, 0),
      mainWait: d(pid, 1),
      writerRun: writer === null ? 0 : d(writer, 0),
      othersRun,
    };
  };

  const sum: ThreadShares = { mainRun: 0, mainWait: 0, writerRun: 0, othersRun: 0 };
  let covered = 0;
  for (const w of windows) {
    const from = w.at;
    const to = w.at + w.ms;
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1]!;
      const b = samples[i]!;
      const overlap = Math.min(to, b.at) - Math.max(from, a.at);
      if (overlap <= 0) continue;
      // A sample interval partly inside the window counts in proportion.
      const part = overlap / (b.at - a.at);
      const d = between(a, b);
      sum.mainRun += d.mainRun * part;
      sum.mainWait += d.mainWait * part;
      sum.writerRun += d.writerRun * part;
      sum.othersRun += d.othersRun * part;
      covered += overlap;
    }
  }
  if (covered === 0) return null;
  const share = (s: ThreadShares, ms: number): ThreadShares => ({
    mainRun: s.mainRun / 1e6 / ms,
    mainWait: s.mainWait / 1e6 / ms,
    writerRun: s.writerRun / 1e6 / ms,
    othersRun: s.othersRun / 1e6 / ms,
  });
  return { slowest: share(sum, covered), all: share(between(first, last), last.at - first.at) };
}

/**
 * Keeps an idle `keyrelay serve` small. V8 sizes its heap for the load it has seen and gives little back on
 * its own while the process sleeps: start-up and any burst grow the young generation to its 32 MB maximum,
 * and the old generation keeps a burst's garbage until the next allocation-driven collection, which an idle
 * process does not reach. Measured with `npm run bench` and heap statistics: ~125–140 MB idle, ~160–220 MB
 * after load, of which 30 MB were young generation and 20–50 MB old garbage; with this, ~90 MB and ~110 MB.
 *
 * Only after a long quiet spell (30 s): a forced collection costs the load that follows. Measured at
 * 2,000 requests/s right after one taken 1–6 s into a pause, CPU per request rose by 50–150 µs for seconds
 * (a shrunk young generation regrows slowly under a proxy's short-lived garbage), and p99 went from ~10 ms
 * to hundreds. Traffic with pauses shorter than that never sees a collection of ours.
 *
 * Process-level policy, so only the CLI's serve uses it; an embedder (the tests) keeps V8's defaults. It
 * needs V8's gc(), which only `--expose-gc` on the node command line gives (`npm start` passes it); without
 * it there is no idle collection and V8 alone decides.
 */
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';

/** What V8 shrinks an idle young generation to (1 MB semi-spaces) is well under this. */
const SMALL_YOUNG_GENERATION = 4 * 1024 * 1024;

/** V8's gc(), with the options V8 takes since Node 20. */
type Gc = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** V8's gc() when node was started with `--expose-gc`; null otherwise. */
export function exposedGc(): Gc | null {
  const gc = (globalThis as { gc?: Gc }).gc;
  return typeof gc === 'function' ? gc : null;
}

export interface IdleReclaimOptions {
  /** How often the process is checked for traffic (the event loop's utilisation, or `traffic`). */
  everyMs?: number;
  /**
   * A sample under this utilisation is a quiet one. 10 %: V8's own memory reducer takes ~65 ms some seconds
   * into a pause, which must not count as traffic; a process at a tenth of its capacity does not feel one
   * collection.
   */
  quietUtilization?: number;
  /** How long the process must have been quiet before it is collected. */
  idleMs?: number;
  /**
   * Growth of RSS since the last collection that is worth a full collection once idle. 1 MB, i.e. after
   * any traffic: a few hundred requests after start leave RSS only 3–7 MB over what it was after the start
   * collection, yet a collection gives some of it back, and a 16 MB bar left that in place for good. One collection after a quiet spell costs ~45 ms of an idle loop.
   */
  minGrowthBytes?: number;
  /**
   * The server's requests: how many are in flight (proxied exchanges, streams included, and open
   * WebSockets) and how many have arrived so far. When given, a tick is quiet when none is in flight and
   * none arrived since the tick before; the event loop's utilisation is not consulted. V8's incremental
   * marking runs in tasks on the event loop that no 'gc' entry reports: the memory reducer's, ~28 s into a
   * pause after 1,000 streams, made two ticks 86–96 ms busy (20 ms of it reported), and on a slower machine
   * that restarted the spell, so the bench read RSS 51 MB over idle 44 s after its load with the last
   * reclaim 5 minutes old. Open streams are traffic however little they keep the loop busy.
   */
  traffic?: () => { inFlight: number; arrived: number };
  /**
   * Told of each collection: why (memory grew, or only the young generation is large) and how long it took.
   */
  onCollect?: (reason: 'start' | 'grown' | 'young', ms: number) => void;
}

/**
 * Once the event loop has been nearly idle for `idleMs`, runs one full collection if memory grew since the
 * last one or the young generation is still large: the old generation's garbage goes back to the system,
 * and V8, whose allocation-rate window (5 s) has long forgotten the traffic, shrinks the young generation in
 * the same collection. At most one per quiet spell (~10–30 ms on an event loop with nothing else to do; a
 * request arriving meanwhile waits that long).
 */
export function startIdleReclaim(gc: Gc, opts: IdleReclaimOptions = {}): { stop(): void } {
  const everyMs = opts.everyMs ?? 1000;
  const quiet = opts.quietUtilization ?? 0.1;
  const idleMs = opts.idleMs ?? 30_000;
  const minGrowth = opts.minGrowthBytes ?? 1024 * 1024;
  let gcMs = 0;
  const collect = (reason: 'start' | 'grown' | 'young'): void => {
    const t = performance.now();
    gc();
    // V8 12 and 13 (Node 22, 24) keep a large young generation through a plain full collection while their
    // allocation-rate window still remembers traffic; a memory-reducing one shrinks it (on V8 11, Node 20,
    // it does not, nor is it needed: the plain one shrinks an idle process's). Only then: it is slower.
    if (reason !== 'start' && youngGenerationBytes() > SMALL_YOUNG_GENERATION) {
      gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    }
    const ms = performance.now() - t;
    gcMs += ms;
    opts.onCollect?.(reason, ms);
  };

  collect('start'); // start-up garbage, before the first request
  let baseline = residentBytes() ?? 0;
  let quietFor = 0;
  let checked = false;
  let last = performance.eventLoopUtilization();
  let arrived = opts.traffic?.().arrived ?? 0;
  const trafficSince = (): boolean => {
    const now = opts.traffic!();
    const busy = now.inFlight > 0 || now.arrived !== arrived;
    arrived = now.arrived;
    return busy;
  };
  // Nor do V8's: its memory reducer collects a pause's garbage by itself some seconds in, 50–200 ms after a
  // burst on a shared core. Counted as traffic, it restarted the quiet spell: the reclaim ran ~60 s after
  // the burst instead of 30 (seen in the debug log after a burst of streams). Node reports a
  // collection after the timer that saw its time, so each tick judges the one before it, by start times.
  const v8Gcs: { start: number; ms: number }[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) v8Gcs.push({ start: e.startTime, ms: e.duration });
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  let lastAt = performance.now();
  let previous: { from: number; to: number; busyMs: number; totalMs: number } | null = null;

  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const { active, idle } = performance.eventLoopUtilization(now, last);
    last = now;
    const at = performance.now();
    // Our own collections do not make the process busy. Their collections also reach v8Gcs:
    // subtracted twice, which only makes that tick quieter, as it was.
    const current = { from: lastAt, to: at, busyMs: active - gcMs, totalMs: active + idle };
    lastAt = at;
    gcMs = 0;
    const judged = previous;
    previous = current;
    if (!judged) return;
    let v8Ms = 0;
    while (v8Gcs.length > 0 && v8Gcs[0]!.start < judged.to) {
      const gc = v8Gcs.shift()!;
      if (gc.start >= judged.from) v8Ms += gc.ms;
    }
    if (opts.traffic ? trafficSince() : judged.busyMs - v8Ms > quiet * judged.totalMs) {
      quietFor = 0;
      checked = false;
      return;
    }
    quietFor += everyMs;
    const rss = residentBytes();
    if (rss === null) return;
    if (quietFor < idleMs || checked) {
      baseline = Math.min(baseline, rss); // lowered as V8 unmaps what an earlier collection freed
      return;
    }
    // Once per quiet spell: should V8 decline to shrink the young generation, the process is left alone.
    checked = true;
    const grown = rss - baseline > minGrowth;
    if (grown || youngGenerationBytes() > SMALL_YOUNG_GENERATION) {
      collect(grown ? 'grown' : 'young');
      baseline = residentBytes() ?? baseline;
    }
  }, everyMs);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      gcObserver.disconnect();
    },
  };
}

/**
 * RSS is read from /proc, which needs a file descriptor: at the descriptor limit (a flood of connections)
 * it throws EMFILE, which in a timer would end the process. That tick is skipped instead.
 */
function residentBytes(): number | null {
  try {
    return process.memoryUsage.rss();
  } catch {
    return null;
  }
}

function youngGenerationBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

/** The variables that fix one of glibc malloc's thresholds, which stops it from raising them. */
const MALLOC_THRESHOLD_VARIABLES = [
  'MALLOC_TRIM_THRESHOLD_',
  'MALLOC_TOP_PAD_',
  'MALLOC_MMAP_THRESHOLD_',
  'MALLOC_MMAP_MAX_',
];
const MALLOC_THRESHOLD_TUNABLES = /glibc\.malloc\.(trim_threshold|top_pad|mmap_threshold|mmap_max)=/;

/**
 * Whether malloc keeps memory an idle process could give back. Each time the process frees a large block
 * (one glibc had mapped on its own, 128 KiB or more), glibc raises its mmap threshold to that block's size
 * and keeps up to twice that free at the top of every thread's arena, for good, unless one of its thresholds
 * was set when the process started. Measured at the bench's idle step (33 s quiet after a few hundred
 * requests): 105–115 MB RSS without, 95–103 MB with MALLOC_TRIM_THRESHOLD_ at glibc's own default (131072),
 * which `npm start` and the container set; CPU per request at saturation the same (ten alternating runs).
 * False off glibc (musl, macOS), whose malloc does not do this. Called before the server opens its sockets
 * (glibcVersion).
 */
export function mallocKeepsFreedMemory(
  env: Readonly<Record<string, string | undefined>>,
  glibc: boolean = glibcVersion() !== null,
): boolean {
  if (!glibc) return false;
  if (MALLOC_THRESHOLD_VARIABLES.some((name) => env[name] !== undefined)) return false;
  return !MALLOC_THRESHOLD_TUNABLES.test(env.GLIBC_TUNABLES ?? '');
}

/**
 * The C library's glibc version, or null when it is another one: what Node's diagnostic report says. Ask
 * before opening sockets: the report resolves the names of every open socket's ends.
 */
function glibcVersion(): string | null {
  const header = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header;
  return header?.glibcVersionRuntime ?? null;
}

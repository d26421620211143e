/**
 * Keeps an idle `keyrelay serve` small. V8 sizes its heap for the load it has seen and gives little back on
 * its own while the process sleeps: start-up and any burst grow the young generation to its 32 MB maximum,
 * and the old generation keeps a burst's garbage until the next allocation-driven collection, which an idle
 * process does not reach (V8's memory reducer gets to it sometimes, tens of seconds later). Measured with
 * `npm run bench` and heap statistics: ~125–140 MB idle, ~160–220 MB after load, of which 30 MB were young
 * generation and 20–50 MB old garbage; with this, ~90 MB and ~110 MB.
 *
 * Process-level policy, so only the CLI's serve uses it; an embedder (the tests) keeps V8's defaults.
 */
import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** What V8 shrinks an idle young generation to (1 MB semi-spaces) is well under this. */
const SMALL_YOUNG_GENERATION = 4 * 1024 * 1024;

/** V8's gc() without --expose-gc on the command line (nothing else sees it: it lives in a new context). */
function exposeGc(): () => void {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

export interface IdleReclaimOptions {
  /** How often the event loop's utilisation is sampled; a sample under `quietUtilization` is a quiet one. */
  everyMs?: number;
  quietUtilization?: number;
  /** Growth of RSS since the last collection that is worth a full collection once things are quiet. */
  minGrowthBytes?: number;
  /** Told of each collection: why, and how long the event loop was held. */
  onCollect?: (reason: 'start' | 'grown' | 'young', ms: number) => void;
}

/**
 * When the process has gone quiet (event loop nearly idle for a sample) after its memory grew, runs a full
 * collection: the old generation's garbage goes back to the system instead of waiting for the next burst.
 * A young generation grown by load is shrunk by a second one once V8's allocation-rate window (5 s) no
 * longer remembers the burst: only then does V8 agree to shrink it. At most two collections per burst,
 * each ~10–30 ms on an event loop with nothing else to do; a request arriving meanwhile waits that long.
 */
export function startIdleReclaim(opts: IdleReclaimOptions = {}): { stop(): void } {
  const everyMs = opts.everyMs ?? 1000;
  const quiet = opts.quietUtilization ?? 0.02;
  const minGrowth = opts.minGrowthBytes ?? 16 * 1024 * 1024;
  const gc = exposeGc();
  let gcMs = 0;
  const collect = (reason: 'start' | 'grown' | 'young'): void => {
    const t = performance.now();
    gc();
    const ms = performance.now() - t;
    gcMs += ms;
    opts.onCollect?.(reason, ms);
  };

  collect('start'); // start-up garbage, before the first request
  let baseline = process.memoryUsage.rss();
  let quietFor = 0;
  let shrinkTried = false;
  let last = performance.eventLoopUtilization();

  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const { active, idle } = performance.eventLoopUtilization(now, last);
    last = now;
    // Our own collections do not make the process busy.
    const busy = active - gcMs > quiet * (active + idle);
    gcMs = 0;
    if (busy) {
      quietFor = 0;
      shrinkTried = false;
      return;
    }
    quietFor += everyMs;
    const rss = process.memoryUsage.rss();
    // Once per quiet spell: should V8 still decline to shrink, the process is left alone.
    const shrinkYoung = !shrinkTried && quietFor >= 6000 && youngGenerationBytes() > SMALL_YOUNG_GENERATION;
    if (rss - baseline > minGrowth || shrinkYoung) {
      shrinkTried ||= shrinkYoung;
      collect(rss - baseline > minGrowth ? 'grown' : 'young');
      baseline = process.memoryUsage.rss(); // lowered on later quiet samples as V8 unmaps what it freed
    } else baseline = Math.min(baseline, rss);
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

function youngGenerationBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

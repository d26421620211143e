/**
 * Fills the daily usage rollup in the background (LogStore.fillUsageRollup): after an upgrade, the days
 * logged before it existed; after each hourly prune, what retention left of the day it cut into. A day at a
 * time, newest first, until none is left; then again an hour later, which finds nothing in one indexed read
 * when nothing changed.
 */
import type { LogStore } from '../store/types.js';

const INTERVAL_MS = 3_600_000;
/**
 * Between two days: each holds the log's write lock (on PostgreSQL, the rollup's lock) while it sums its
 * day's rows, and the log writer's batches go in between.
 */
const PAUSE_MS = 250;
/** The first fill waits for the start to settle (migrations, caches warming). */
const FIRST_MS = 5_000;

export function startRollupFill(
  logStore: Pick<LogStore, 'fillUsageRollup'>,
  onError: (err: unknown) => void,
): { stop(): Promise<void>; runOnce(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> | null = null;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
  const fill = async () => {
    while (!stopped && (await logStore.fillUsageRollup())) await sleep(PAUSE_MS);
  };
  const runOnce = (): Promise<void> =>
    (running ??= fill()
      .catch(onError)
      .finally(() => {
        running = null;
      }));
  const first = setTimeout(() => void runOnce(), FIRST_MS);
  const timer = setInterval(() => void runOnce(), INTERVAL_MS);
  first.unref();
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
    runOnce,
  };
}

/**
 * How the write-behind writers (queue.ts for rows, spend-rollup.ts for spend) retry a store that fails: each
 * keeps what it could not write and tries again later, sooner than a log line a second, never in a busy loop.
 */

const MAX_BACKOFF_MS = 5_000;

/** The wait before the next write after `failures` failed ones in a row: 0, then 200 ms doubling to 5 s. */
export function backoffMs(failures: number): number {
  return failures ? Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(failures, 6)) : 0;
}

export interface Flushable {
  /** Something is left to write. */
  pending(): boolean;
  /** Failed writes so far (a write that fails raises it). */
  failures(): number;
  /** The write in progress, or a new one; never rejects. */
  write(): Promise<void>;
}

/**
 * Writes until nothing is left (graceful shutdown); true when all of it was written. The deadline bounds
 * retrying a store that fails, not writing to one that works: a first write that starts the SQLite writer's
 * worker on a loaded machine outlasted a short deadline, and the rows behind it were lost with the store
 * healthy.
 */
export async function writeAll(w: Flushable, deadlineMs: number): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (w.pending()) {
    const before = w.failures();
    await w.write();
    if (w.failures() === before) continue;
    if (Date.now() >= until) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

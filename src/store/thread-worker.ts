/**
 * The worker's side of store-thread.ts: lowers the thread's priority below the event loop's and answers
 * calls of a store's methods by name. Imported only by worker modules (sqlite/log-store-worker.ts,
 * postgres/log-reader-worker.ts).
 */
import { getPriority, setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import type { Call, Reply } from './store-thread.js';

/**
 * Call once, first thing in the worker: runs it `by` nice levels below the thread that started it. The
 * worker imports its store dynamically after this call: a static import runs before the module's first
 * line, so the store's modules (~25 ms of CPU for SQLite's) would load at the event loop's priority, on its
 * core, whenever a thread starts under load.
 */
export function lowerThreadPriority(by: number): void {
  // On Linux a nice value belongs to a thread (setpriority(2), under BUGS: NPTL threads each have their
  // own), so this lowers this worker alone. Elsewhere it would lower the whole process: left alone there.
  if (process.platform !== 'linux') return;
  try {
    // Relative to the thread that started it, which may already run niced: 19 is the lowest there is.
    setPriority(Math.min(19, getPriority() + by));
  } catch {
    // Lowering one's own priority is always permitted; should a sandbox refuse it, the thread runs as before.
  }
}

function wireError(err: unknown): Reply {
  return {
    id: 0,
    error: {
      name: err instanceof Error ? err.name : 'Error',
      message: err instanceof Error ? err.message : String(err),
      code: (err as { code?: unknown } | null)?.code,
    },
  };
}

/**
 * Answers the calls of `calls` on `store` until told to close, then closes it once every call is answered.
 * `oneAtATime`: each call starts after the one before has ended (a SQLite connection, whose writes must stay
 * in order); otherwise they run together, as the store's pool allows.
 */
export function serveStoreCalls(
  store: { close(): Promise<void> },
  calls: ReadonlySet<string>,
  oneAtATime: boolean,
): void {
  const port = parentPort!;
  let last: Promise<void> = Promise.resolve();
  const running = new Set<Promise<void>>();
  port.on('message', (msg: Call) => {
    if ('close' in msg) {
      void Promise.allSettled([last, ...running])
        .then(() => store.close())
        .then(() => port.close());
      return;
    }
    const { id, method, args } = msg;
    const run = (): unknown => {
      if (!calls.has(method)) throw new Error(`not a log store call: ${method}`);
      const fn = (store as unknown as Record<string, (...a: unknown[]) => unknown>)[method]!;
      return fn.apply(store, args);
    };
    // A throw inside then() is the rejection the second callback answers with.
    const answered = (oneAtATime ? last : Promise.resolve()).then(run).then(
      (result) => port.postMessage({ id, result } satisfies Reply),
      (err: unknown) => port.postMessage({ ...wireError(err), id }),
    );
    if (oneAtATime) last = answered;
    else {
      running.add(answered);
      void answered.then(() => running.delete(answered));
    }
  });
}

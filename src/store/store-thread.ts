/**
 * A log store on a worker thread, called by method name (the worker answers with thread-worker.ts). SQLite's
 * drivers are synchronous: a query on the event loop holds every proxied request until it returns; the log
 * writer (sqlite/log-writer.ts) owns one, and the store the server reads and prunes through
 * (sqlite/log-thread.ts) two. On PostgreSQL the console's reads (postgres/log-thread.ts) run on one too: the
 * database does the summing, but parsing a month's sums and merging them is 10-20 ms of CPU a view.
 *
 * The worker starts on the first call and exits after `idleMs` without one; the next call starts another.
 */
import { existsSync, stat } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { DOMAIN_ERRORS, domainError, type DomainErrorCode } from '../errors.js';

/**
 * The server's log threads are started by the console, the hourly prune and the batch ledger; a start costs
 * ~30 ms of CPU, an idle thread several MB: 30 s covers a person clicking through the console.
 */
export const LOG_READER_IDLE_MS = 30_000;

/**
 * How much lower than the event loop a thread that writes the log runs (a nice value). It shares a core
 * with the proxy: a SQLite batch of 500 rows is ~8 ms of CPU, and at equal priority a request arriving
 * meanwhile waited for the scheduler's slice to end, which put the writer's bursts in the proxy's p99. At 5
 * the kernel weighs the thread at a third of the loop: a waking request is run first, and under saturation
 * the writer still gets ~25 % of the core, over the ~10 % it needs to keep up (a row is ~15 µs; the proxy
 * tops out near 7,000 rows a second), so the queue does not grow. SQLite's prune and batch ledger run at it
 * too: they hold SQLite's one write lock, which the writer waits on.
 */
export const WRITING_THREAD_NICE = 5;

/**
 * A thread that only reads for the console: nothing waits on it but a person, and no lock of its blocks a
 * writer. A month's view is 10-300 ms of its CPU, which at the writer's weight still delayed proxied
 * requests on a shared core; at 19 the kernel runs it when the event loop has nothing to do.
 */
export const READING_THREAD_NICE = 19;

export interface StoreThreadOptions {
  /** What errors call the store, e.g. "the SQLite log store". */
  name: string;
  /** The worker module without its extension: `.js` in the build, `.ts` from source. */
  module: URL;
  /** What the worker opens its store with (crosses by structured clone: no callbacks). */
  workerData: unknown;
  /** The worker exits after this long without a call. */
  idleMs: number;
  resourceLimits?: ResourceLimits;
}

/** What a call's failure carries across: the store's domain errors are rebuilt as themselves. */
export interface WireError {
  name: string;
  message: string;
  code?: unknown;
}

export type Reply = { id: number; result: unknown } | { id: number; error: WireError };

/** What the worker is sent: a call of its store's method, or the request to close it and exit. */
export type Call = { id: number; method: string; args: unknown[] } | { close: true };

interface Pending {
  resolve: (r: unknown) => void;
  reject: (e: Error) => void;
}

interface Running {
  worker: Worker;
  pending: Map<number, Pending>;
  idle: NodeJS.Timeout | null;
}

function tsxApi(): string {
  const cjs = createRequire(import.meta.url).resolve('tsx/esm/api');
  return pathToFileURL(cjs.replace(/\.cjs$/, '.mjs')).href;
}

function fromWire(e: WireError): Error {
  // A domain error crosses the thread as its name and code: rebuilt, so the edges can map it.
  if (e.name === 'DomainError' && typeof e.code === 'string' && Object.hasOwn(DOMAIN_ERRORS, e.code))
    return domainError(e.code as DomainErrorCode, e.message);
  return Object.assign(new Error(e.message), { code: e.code });
}

/**
 * libuv's thread pool (fs, dns.lookup, zlib, crypto) is created by the first thread that queues work on it,
 * and on Linux its threads take that thread's nice value. Were a lowered worker first (a PostgreSQL reader
 * resolving its host), the event loop's lookups and decompression would run at nice 19 for the process's
 * life: a stat queued from the starting thread first creates the pool at its priority.
 */
let poolStarted = false;
function startThreadPoolHere(path: string): void {
  if (poolStarted) return;
  poolStarted = true;
  stat(path, () => {});
}

export class StoreThread {
  private current: Running | null = null;
  private seq = 0;
  private closed = false;

  constructor(private readonly opts: StoreThreadOptions) {}

  /** Calls `method` on the worker's store; its result crosses by structured clone. */
  call<T>(method: string, args: unknown[]): Promise<T> {
    // A late call would start a worker that holds the process open for idleMs after its stop.
    if (this.closed) return Promise.reject(new Error(`${this.opts.name} is closed`));
    const run = this.current ?? this.start();
    if (run.idle) clearTimeout(run.idle);
    run.idle = null;
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      run.pending.set(id, { resolve: resolve as (r: unknown) => void, reject });
      run.worker.postMessage({ id, method, args } satisfies Call);
    });
  }

  private start(): Running {
    const js = new URL(`${this.opts.module.href}.js`);
    const jsPath = fileURLToPath(js);
    startThreadPoolHere(jsPath);
    const options = { workerData: this.opts.workerData, resourceLimits: this.opts.resourceLimits };
    const worker = existsSync(jsPath)
      ? new Worker(js, options)
      : // From source (tsx, vitest) the worker is TypeScript. Node 20 applies no --import hooks inside a
        // worker, so it registers tsx's loader itself before importing the module.
        new Worker(
          `import(${JSON.stringify(tsxApi())}).then(({ register }) => { register(); ` +
            `return import(${JSON.stringify(`${this.opts.module.href}.ts`)}); });`,
          { ...options, eval: true },
        );
    const run: Running = { worker, pending: new Map(), idle: null };
    worker.on('message', (msg: Reply) => {
      const p = run.pending.get(msg.id);
      if (!p) return;
      run.pending.delete(msg.id);
      if ('error' in msg) p.reject(fromWire(msg.error));
      else p.resolve(msg.result);
      if (run.pending.size === 0 && this.current === run) {
        run.idle = setTimeout(() => void this.retire(run), this.opts.idleMs);
        run.idle.unref();
      }
    });
    const fail = (err: Error) => {
      // A caller that retries (the log queue keeps a failed batch) starts a new worker with its next call.
      if (this.current === run) this.current = null;
      if (run.idle) clearTimeout(run.idle);
      for (const p of run.pending.values()) p.reject(err);
      run.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the worker of ${this.opts.name} exited (${code})`)));
    this.current = run;
    return run;
  }

  /** Asks a worker to finish the calls it has, close its database and exit. */
  private retire(run: Running): Promise<void> {
    if (this.current === run) this.current = null;
    if (run.idle) clearTimeout(run.idle);
    const exited = new Promise<void>((resolve) => run.worker.once('exit', () => resolve()));
    run.worker.postMessage({ close: true } satisfies Call);
    return exited;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.current) await this.retire(this.current);
  }
}

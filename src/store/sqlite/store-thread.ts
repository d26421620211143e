/**
 * A SqliteLogStore on a worker thread, called by method name (log-store-worker.ts). Both SQLite drivers
 * are synchronous: a query on the event loop holds every proxied request until it returns. The log writer
 * (log-writer.ts) and the store the server reads through (log-thread.ts) each own one of these.
 *
 * The worker starts on the first call and exits after `idleMs` without one; the next call starts another.
 * Calls run one at a time, in the order made.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { DOMAIN_ERRORS, domainError, type DomainErrorCode } from '../../errors.js';
import type { SqliteLogStoreOptions } from './log-store.js';

/** What the worker's store is opened with: the options that cross a thread (no callbacks). */
export type WorkerStoreOptions = Omit<SqliteLogStoreOptions, 'onSearchIndex'>;

export interface StoreThreadOptions {
  /** The worker exits after this long without a call. */
  idleMs: number;
  store: WorkerStoreOptions;
  resourceLimits?: ResourceLimits;
}

/** What a call's failure carries across: the store's domain errors are rebuilt as themselves. */
export interface WireError {
  name: string;
  message: string;
  code?: unknown;
}

export type Reply = { id: number; result: unknown } | { id: number; error: WireError };

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

export class StoreThread {
  private current: Running | null = null;
  private seq = 0;
  private closed = false;

  constructor(
    private readonly path: string,
    private readonly opts: StoreThreadOptions,
  ) {}

  /** Calls `method` on the worker's SqliteLogStore; its result crosses by structured clone. */
  call<T>(method: string, args: unknown[]): Promise<T> {
    // A late call would start a worker that holds the process open for idleMs after its stop.
    if (this.closed) return Promise.reject(new Error('the SQLite log store is closed'));
    const run = this.current ?? this.start();
    if (run.idle) clearTimeout(run.idle);
    run.idle = null;
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      run.pending.set(id, { resolve: resolve as (r: unknown) => void, reject });
      run.worker.postMessage({ id, method, args });
    });
  }

  private start(): Running {
    const js = new URL('./log-store-worker.js', import.meta.url);
    const options = {
      workerData: { path: this.path, options: this.opts.store },
      resourceLimits: this.opts.resourceLimits,
    };
    const worker = existsSync(fileURLToPath(js))
      ? new Worker(js, options)
      : // From source (tsx, vitest) the worker is TypeScript. Node 20 applies no --import hooks inside a
        // worker, so it registers tsx's loader itself before importing the module.
        new Worker(
          `import(${JSON.stringify(tsxApi())}).then(({ register }) => { register(); ` +
            `return import(${JSON.stringify(new URL('./log-store-worker.ts', import.meta.url).href)}); });`,
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
    worker.on('exit', (code) => fail(new Error(`SQLite log worker exited (${code})`)));
    this.current = run;
    return run;
  }

  /** Asks a worker to finish the calls it has, close its database and exit. */
  private retire(run: Running): Promise<void> {
    if (this.current === run) this.current = null;
    if (run.idle) clearTimeout(run.idle);
    const exited = new Promise<void>((resolve) => run.worker.once('exit', () => resolve()));
    run.worker.postMessage({ close: true });
    return exited;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.current) await this.retire(this.current);
  }
}

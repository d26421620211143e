/**
 * SQLite request-log writes on a worker thread. better-sqlite3 is synchronous and a row costs ~25 µs
 * (six B-trees), so a batch written on the event loop held every proxied request behind it (bench: p99 and
 * throughput with logging on). The worker has its own connection; WAL lets the console read meanwhile.
 * Started on the first write, so CLI commands that never write spawn nothing.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { RequestLogRow } from '../../types.js';
import type { InsertResult } from '../types.js';
import { encodeRows } from './log-store.js';

interface Pending {
  resolve: (r: InsertResult) => void;
  reject: (e: Error) => void;
}

type Reply =
  { id: number; result: InsertResult } | { id: number; error: { message: string; code?: unknown } };

/** The worker holds one batch at a time: a small heap keeps its share of the process's memory small. */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 64 };

function tsxApi(): string {
  const cjs = createRequire(import.meta.url).resolve('tsx/esm/api');
  return pathToFileURL(cjs.replace(/\.cjs$/, '.mjs')).href;
}

interface Running {
  worker: Worker;
  pending: Map<number, Pending>;
  idle: NodeJS.Timeout | null;
}

export class SqliteLogWriter {
  private current: Running | null = null;
  private seq = 0;

  constructor(
    private readonly path: string,
    /**
     * A worker with nothing to write for this long exits (KEYRELAY_LOG_WRITER_IDLE_MS, 10 minutes). A new
     * one costs ~29 ms of CPU on the process's core, which the requests in flight then pay in their first
     * bytes: at 20 s, every burst after a pause longer than that did. Kept, an idle worker holds ~3.5 MB
     * once the idle reclaim has run, ~9 MB after a burst; only its exit gives that back (docs/performance.md,
     * "Sixth pass").
     */
    private readonly idleMs = 600_000,
    /** KEYRELAY_SQLITE_CACHE_MB, for the worker's connection. */
    private readonly cacheMb?: number,
  ) {}

  insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult> {
    const run = this.current ?? this.start();
    if (run.idle) clearTimeout(run.idle);
    run.idle = null;
    const id = ++this.seq;
    // Encoded here, not in the worker: the message is then arrays of values, which the structured clone
    // copies for about a third of what rows as objects cost (the worker's own loop, on the same core).
    return new Promise<InsertResult>((resolve, reject) => {
      const { encoded, rejected } = encodeRows(rows);
      run.pending.set(id, { resolve, reject });
      run.worker.postMessage({ id, rows: encoded, rejected });
    });
  }

  private start(): Running {
    const js = new URL('./log-writer-worker.js', import.meta.url);
    const worker = existsSync(fileURLToPath(js))
      ? new Worker(js, {
          workerData: { path: this.path, cacheMb: this.cacheMb },
          resourceLimits: WORKER_LIMITS,
        })
      : // From source (tsx, vitest) the worker is TypeScript. Node 20 applies no --import hooks inside a
        // worker, so it registers tsx's loader itself before importing the module.
        new Worker(
          `import(${JSON.stringify(tsxApi())}).then(({ register }) => { register(); ` +
            `return import(${JSON.stringify(new URL('./log-writer-worker.ts', import.meta.url).href)}); });`,
          {
            eval: true,
            workerData: { path: this.path, cacheMb: this.cacheMb },
            resourceLimits: WORKER_LIMITS,
          },
        );
    const run: Running = { worker, pending: new Map(), idle: null };
    worker.on('message', (msg: Reply) => {
      const p = run.pending.get(msg.id);
      if (!p) return;
      run.pending.delete(msg.id);
      if ('result' in msg) p.resolve(msg.result);
      else p.reject(Object.assign(new Error(msg.error.message), { code: msg.error.code }));
      if (run.pending.size === 0 && this.current === run) {
        run.idle = setTimeout(() => void this.retire(run), this.idleMs);
        run.idle.unref();
      }
    });
    const fail = (err: Error) => {
      // The queue keeps a failed batch and retries it: a new worker is started on the next write.
      if (this.current === run) this.current = null;
      if (run.idle) clearTimeout(run.idle);
      for (const p of run.pending.values()) p.reject(err);
      run.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`log writer exited (${code})`)));
    this.current = run;
    return run;
  }

  /** Asks an idle worker to close its database and exit; the next write starts a new one. */
  private retire(run: Running): Promise<void> {
    if (this.current === run) this.current = null;
    if (run.idle) clearTimeout(run.idle);
    const exited = new Promise<void>((resolve) => run.worker.once('exit', () => resolve()));
    run.worker.postMessage({ close: true });
    return exited;
  }

  async close(): Promise<void> {
    if (this.current) await this.retire(this.current);
  }
}

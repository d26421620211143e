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
import { DEFAULT_LOG_BATCH_BODY_CHARS } from '../../config.js';
import type { RequestLogRow } from '../../types.js';
import type { InsertResult } from '../types.js';
import { encodeRows } from './log-store.js';

interface Pending {
  resolve: (r: InsertResult) => void;
  reject: (e: Error) => void;
}

type Reply =
  { id: number; result: InsertResult } | { id: number; error: { message: string; code?: unknown } };

/**
 * The worker holds one batch at a time: a small heap keeps its share of the process's memory small, but it
 * must hold the largest batch. At its peak a batch is in the heap twice (the message's strings and what
 * the insert reads), a character is one or two bytes: measured with one-byte text, 31 Mi characters fit a
 * 64 MB old generation and 43 Mi did not (the worker died, and the queue retried the batch for ever).
 */
function workerLimits(batchChars: number): {
  maxYoungGenerationSizeMb: number;
  maxOldGenerationSizeMb: number;
} {
  return {
    // A batch arriving is ~1 MB of strings under load: with 2 MB the worker scavenged ~11 times a second,
    // ~3.7 µs a request on the proxy's core; with 8, ~3 times and ~1 µs, for +2–3 MB at peak
    // (docs/performance.md, "Seventh pass").
    maxYoungGenerationSizeMb: 8,
    maxOldGenerationSizeMb: Math.max(64, 32 + 4 * Math.ceil(batchChars / 2 ** 20)),
  };
}

export interface SqliteLogWriterOptions {
  /**
   * A worker with nothing to write for this long exits (KEYRELAY_LOG_WRITER_IDLE_MS, 10 minutes). A new
   * one costs ~29 ms of CPU on the process's core, which the requests in flight then pay in their first
   * bytes: at 20 s, every burst after a pause longer than that did. Kept, an idle worker holds ~3.5 MB
   * once the idle reclaim has run, ~9 MB after a burst; only its exit gives that back (docs/performance.md,
   * "Sixth pass").
   */
  idleMs?: number;
  /** KEYRELAY_SQLITE_CACHE_MB, for the worker's connection. */
  cacheMb?: number;
  /** The most body text one batch can carry (characters): the worker's heap is sized for it. */
  batchChars?: number;
}

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

  private readonly idleMs: number;
  private readonly cacheMb: number | undefined;
  private readonly limits: ReturnType<typeof workerLimits>;

  constructor(
    private readonly path: string,
    opts: SqliteLogWriterOptions = {},
  ) {
    this.idleMs = opts.idleMs ?? 600_000;
    this.cacheMb = opts.cacheMb;
    this.limits = workerLimits(opts.batchChars ?? DEFAULT_LOG_BATCH_BODY_CHARS);
  }

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
    const options = { workerData: { path: this.path, cacheMb: this.cacheMb }, resourceLimits: this.limits };
    const worker = existsSync(fileURLToPath(js))
      ? new Worker(js, options)
      : // From source (tsx, vitest) the worker is TypeScript. Node 20 applies no --import hooks inside a
        // worker, so it registers tsx's loader itself before importing the module.
        new Worker(
          `import(${JSON.stringify(tsxApi())}).then(({ register }) => { register(); ` +
            `return import(${JSON.stringify(new URL('./log-writer-worker.ts', import.meta.url).href)}); });`,
          { ...options, eval: true },
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

/**
 * SQLite request-log writes on a worker thread. better-sqlite3 is synchronous and a row costs ~25 µs
 * (six B-trees), so a batch written on the event loop held every proxied request behind it (bench: p99 and
 * throughput with logging on). The worker has its own connection; WAL lets the console read meanwhile.
 * Started on the first write, so CLI commands that never write spawn nothing.
 */
import { DEFAULT_LOG_BATCH_BODY_CHARS } from '../../config.js';
import type { RequestLogRow } from '../../types.js';
import type { InsertResult, SpendEntry } from '../types.js';
import { encodeRows } from './log-store.js';
import { StoreThread } from './store-thread.js';

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

export class SqliteLogWriter {
  private readonly thread: StoreThread;

  constructor(path: string, opts: SqliteLogWriterOptions = {}) {
    this.thread = new StoreThread(path, {
      idleMs: opts.idleMs ?? 600_000,
      store: { cacheMb: opts.cacheMb, trustEncoded: true },
      resourceLimits: workerLimits(opts.batchChars ?? DEFAULT_LOG_BATCH_BODY_CHARS),
    });
  }

  async insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult> {
    // Encoded here, not in the worker: the message is then arrays of values, which the structured clone
    // copies for about a third of what rows as objects cost (the worker's own loop, on the same core).
    const { encoded, rejected } = encodeRows(rows);
    return await this.thread.call<InsertResult>('insertEncoded', [encoded, rejected]);
  }

  /** On the writer's own connection, after the batches sent before it (LogWriter.spendSince). */
  spendSince(keyId: string, since: string): Promise<number> {
    return this.thread.call<number>('spendSince', [keyId, since]);
  }

  addSpend(entries: readonly SpendEntry[]): Promise<void> {
    return this.thread.call<void>('addSpend', [entries]);
  }

  close(): Promise<void> {
    return this.thread.close();
  }
}

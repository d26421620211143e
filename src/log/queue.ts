/**
 * Write-behind queue for request-log rows. The proxy pushes and returns; rows are written in batches, and a
 * batch leaves the queue only after the store committed it, so a failing store (e.g. PostgreSQL restarting)
 * delays rows instead of losing them. Bounded: a full queue drops and counts, it never blocks a request.
 */
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { LOG_BATCH_BODY_CHARS, type LogStore } from '../store/types.js';
import type { RequestLogRow } from '../types.js';
import { backoffMs, writeAll } from './retry.js';

export interface LogQueueOptions {
  batchSize: number;
  /**
   * Body text one batch carries, at most (characters; a batch holds at least one row). Rows are small but
   * their bodies are not: 500 rows with 64 KB bodies each way are 64 Mi characters, past what the SQLite
   * writer's worker can hold at once.
   */
  batchBodyChars: number;
  flushMs: number;
  maxRows: number;
  /**
   * Body text the queue holds, at most (characters). Past it, rows are still queued, without their bodies:
   * during a long store outage 100,000 rows with 64 KB bodies would be ~13 GB, past the process's heap.
   */
  maxBodyChars: number;
}

/**
 * Neither store writes on the event loop's time (PostgreSQL is a round trip; SQLite's writer is a worker
 * thread, store/sqlite/log-writer.ts), and a batch is cheaper per row the larger it is.
 */
export const LOG_QUEUE_OPTIONS: Readonly<LogQueueOptions> = Object.freeze({
  /** Rows per write, at most: one SQLite transaction of 500 rows costs ~2 ms of the writer's thread. */
  batchSize: 500,
  batchBodyChars: LOG_BATCH_BODY_CHARS,
  /**
   * A row waits at most this long, and a crash loses about this much. A commit costs the writer the same
   * ~0.3–0.5 ms whatever a batch holds (bench/batch-size.ts: 46 µs a row in transactions of 35, 35 µs of 100):
   * every 10 ms that was ~5 % of a saturated core. A large batch does not hold the event loop: the SQLite
   * writer takes it over in parts (sqlite/log-writer.ts).
   */
  flushMs: 50,
  /** ~100 MB of rows without bodies: minutes of a store outage at a busy instance's rate. */
  maxRows: 100_000,
  /** 256 Mi characters (~0.5 GB of heap) of queued bodies; past it rows queue without them. */
  maxBodyChars: 256 * 2 ** 20,
});

/** What a row weighs in a batch: its bodies (the rest of a row is small and bounded). */
function bodyChars(row: RequestLogRow): number {
  return (
    (row.request_body?.length ?? 0) +
    (row.response_body?.length ?? 0) +
    (row.response_search_text?.length ?? 0)
  );
}

export class LogQueue {
  private rows: RequestLogRow[] = [];
  /** The queued rows' bodyChars, summed. */
  private chars = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private failures = 0;
  private closed = false;

  constructor(
    private store: Pick<LogStore, 'insertBatch'>,
    private opts: LogQueueOptions,
    private metrics: Metrics,
    private log: Pick<Logger, 'warn' | 'info' | 'error'>,
    /** Told of each batch once committed (the live tail, log/tail.ts). */
    private onWritten: (rows: readonly RequestLogRow[]) => void = () => {},
  ) {}

  push(row: RequestLogRow): void {
    if (this.rows.length >= this.opts.maxRows) {
      this.metrics.logRowsDropped.inc({ reason: 'queue_full' });
      return;
    }
    let chars = bodyChars(row);
    if (chars > 0 && this.chars + chars > this.opts.maxBodyChars) {
      // The row is what counts and limits the call: it is kept, its bodies are not.
      row = {
        ...row,
        request_body: null,
        response_body: null,
        response_search_text: null,
        request_body_truncated: false,
        response_body_truncated: false,
      };
      chars = 0;
      this.metrics.logBodiesDropped.inc();
    }
    this.rows.push(row);
    this.chars += chars;
    this.metrics.logQueueDepth.set(this.rows.length);
    if (this.rows.length >= this.opts.batchSize || this.chars >= this.opts.batchBodyChars) this.schedule(0);
    else this.schedule(this.opts.flushMs);
  }

  get depth(): number {
    return this.rows.length;
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.writing) return;
    if (this.timer && delayMs > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.writeOnce();
    }, delayMs);
    this.timer.unref();
  }

  /** How many of the first rows the next batch takes, and their body characters. */
  private nextBatch(): { size: number; chars: number } {
    const max = Math.min(this.rows.length, this.opts.batchSize);
    let size = 0;
    let chars = 0;
    while (size < max) {
      const c = bodyChars(this.rows[size]!);
      if (size > 0 && chars + c > this.opts.batchBodyChars) break;
      chars += c;
      size++;
    }
    return { size, chars };
  }

  /** Writes one batch; never rejects. */
  private writeOnce(): Promise<void> {
    if (this.writing) return this.writing;
    if (this.rows.length === 0) return Promise.resolve();
    const { size, chars } = this.nextBatch();
    const batch = this.rows.slice(0, size);
    this.writing = this.store
      .insertBatch(batch)
      .then((res: unknown) => {
        // Committed: only now does the batch leave the queue.
        this.rows.splice(0, batch.length);
        this.chars -= chars;
        this.onWritten(batch);
        const rejected = typeof res === 'object' && res && 'rejected' in res ? Number(res.rejected) : 0;
        this.metrics.logRowsWritten.inc(batch.length - rejected);
        if (rejected > 0) this.metrics.logRowsDropped.inc({ reason: 'rejected' }, rejected);
        this.metrics.storeUp.set({ store: 'log' }, 1);
        if (this.failures > 0)
          this.log.info({ queued: this.rows.length }, 'request log store is writable again');
        this.failures = 0;
      })
      .catch((err: unknown) => {
        this.failures++;
        this.metrics.logWriteErrors.inc();
        this.metrics.storeUp.set({ store: 'log' }, 0);
        if (this.failures === 1 || this.failures % 20 === 0) {
          this.log.warn(
            { err, queued: this.rows.length, failures: this.failures },
            'request log write failed; rows kept',
          );
        }
      })
      .finally(() => {
        this.writing = null;
        this.metrics.logQueueDepth.set(this.rows.length);
        if (this.rows.length === 0 || this.closed) return;
        const backoff = backoffMs(this.failures);
        const full = this.rows.length >= this.opts.batchSize || this.chars >= this.opts.batchBodyChars;
        this.schedule(full ? backoff : Math.max(backoff, this.opts.flushMs));
      });
    return this.writing;
  }

  /** Writes everything queued (graceful shutdown, retry.ts writeAll) and reports what is left. */
  async flush(deadlineMs = 30_000): Promise<number> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    await writeAll(
      {
        pending: () => this.rows.length > 0,
        failures: () => this.failures,
        write: () => this.writing ?? this.writeOnce(),
      },
      deadlineMs,
    );
    return this.rows.length;
  }

  /** Stops scheduling; call flush() before to write what is left. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

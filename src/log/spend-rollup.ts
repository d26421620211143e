/**
 * With the request log off, what budgets would have read from its rows: each key's cost, summed by UTC
 * hour in memory and added to the log store's `key_spend` every SPEND_FLUSH_MS (LogStore.addSpend). Without
 * it a restart forgot what keys had spent (Redis keeps a shared total, but only while Redis keeps it).
 * A failed write keeps its sums for the next one; a crash loses at most one interval, a stop none.
 */
import type { Logger } from 'pino';
import { toNanos } from '../limits/index.js';
import type { LogWriter } from '../store/factory.js';
import type { SpendEntry } from '../store/types.js';
import type { RequestLogRow } from '../types.js';
import { backoffMs, writeAll } from './retry.js';

const HOUR_MS = 3_600_000;

/**
 * How often the sums are written, so what a crash may lose of keys' spend. Not the log queue's interval:
 * a write holds a row a key and an hour however many requests it sums, so a short one buys nothing.
 */
export const SPEND_FLUSH_MS = 100;

interface Bucket {
  key_id: string;
  hourMs: number;
  nanos: number;
}

export class SpendRollup {
  private buckets = new Map<string, Bucket>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private failures = 0;
  private closed = false;

  constructor(
    private readonly writer: Pick<LogWriter, 'addSpend'>,
    private readonly flushMs: number,
    private readonly log: Pick<Logger, 'warn' | 'info'>,
  ) {}

  /** The row the log would have kept: only its key, time and cost are read. */
  add(row: RequestLogRow): void {
    if (row.key_id === null || row.cost_usd === null || !(row.cost_usd > 0)) return;
    const hourMs = Math.floor(Date.parse(row.created_at) / HOUR_MS) * HOUR_MS;
    this.addNanos(row.key_id, hourMs, toNanos(row.cost_usd));
    this.schedule(this.flushMs);
  }

  private addNanos(keyId: string, hourMs: number, nanos: number): void {
    const id = `${keyId} ${hourMs}`;
    const b = this.buckets.get(id);
    if (b) b.nanos += nanos;
    else this.buckets.set(id, { key_id: keyId, hourMs, nanos });
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.timer || this.writing) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.writeOnce();
    }, delayMs);
    this.timer.unref();
  }

  /** Writes what is summed so far; never rejects. */
  private writeOnce(): Promise<void> {
    if (this.writing) return this.writing;
    if (this.buckets.size === 0) return Promise.resolve();
    const taken = [...this.buckets.values()];
    this.buckets = new Map();
    const entries: SpendEntry[] = taken.map((b) => ({
      key_id: b.key_id,
      hour: new Date(b.hourMs).toISOString(),
      nanos: b.nanos,
    }));
    this.writing = this.writer
      .addSpend(entries)
      .then(() => {
        if (this.failures > 0) this.log.info('key spend is writable again');
        this.failures = 0;
      })
      .catch((err: unknown) => {
        // Kept: added back to what came in meanwhile, for the next write.
        for (const b of taken) this.addNanos(b.key_id, b.hourMs, b.nanos);
        this.failures++;
        if (this.failures === 1 || this.failures % 20 === 0)
          this.log.warn({ err, failures: this.failures }, 'key spend write failed; kept for the next');
      })
      .finally(() => {
        this.writing = null;
        if (this.buckets.size === 0) return;
        this.schedule(Math.max(backoffMs(this.failures), this.flushMs));
      });
    return this.writing;
  }

  /** Writes everything summed (graceful shutdown, retry.ts writeAll); false when some could not be. */
  flush(deadlineMs = 30_000): Promise<boolean> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    return writeAll(
      {
        pending: () => this.buckets.size > 0 || this.writing !== null,
        failures: () => this.failures,
        write: () => this.writing ?? this.writeOnce(),
      },
      deadlineMs,
    );
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

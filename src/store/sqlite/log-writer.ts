/**
 * SQLite request-log writes on a worker thread. better-sqlite3 is synchronous and a row costs ~25 µs
 * (six B-trees), so a batch written on the event loop held every proxied request behind it (bench: p99 and
 * throughput with logging on). The worker has its own connection; WAL lets the console read meanwhile.
 * Started on the first write, so CLI commands that never write spawn nothing.
 */
import { setImmediate } from 'node:timers/promises';
import type { RequestLogRow } from '../../types.js';
import { LOG_BATCH_BODY_CHARS, type InsertResult, type SpendEntry } from '../types.js';
import { StoreThread, WRITING_THREAD_NICE } from '../store-thread.js';
import { encodeRows, type SqliteWorkerData } from './log-store.js';

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
    // ~3.7 µs a request on the proxy's core; with 8, ~3 times and ~1 µs, for +2–3 MB at peak.
    maxYoungGenerationSizeMb: 8,
    maxOldGenerationSizeMb: Math.max(64, 32 + 4 * Math.ceil(batchChars / 2 ** 20)),
  };
}

/**
 * A worker with nothing to write for this long exits. A new one costs ~29 ms of CPU on the process's core,
 * which the requests in flight then pay in their first bytes: at 20 s, every burst after a pause longer
 * than that did. Kept, an idle worker holds ~3.5 MB once the idle reclaim has run, ~9 MB after a burst;
 * only its exit gives that back.
 */
export const LOG_WRITER_IDLE_MS = 600_000;

export interface SqliteLogWriterOptions {
  /** LOG_WRITER_IDLE_MS unless a test wants it shorter. */
  idleMs?: number;
  /** The worker's connection's page cache, MB (db.ts's SQLITE_CACHE_MB). */
  cacheMb?: number;
  /** The most body text one batch can carry (characters): the worker's heap is sized for it. */
  batchChars?: number;
}

/** Rows encoded and handed to the worker in one go: ~10 µs of the event loop a row, so ~0.25 ms a part. */
const HANDOVER_ROWS = 25;

export class SqliteLogWriter {
  private readonly thread: StoreThread;
  private batches = 0;

  constructor(path: string, opts: SqliteLogWriterOptions = {}) {
    this.thread = new StoreThread({
      name: 'the SQLite log writer',
      module: new URL('./log-store-worker', import.meta.url),
      workerData: {
        path,
        options: { cacheMb: opts.cacheMb, trustEncoded: true },
        nice: WRITING_THREAD_NICE,
      } satisfies SqliteWorkerData,
      idleMs: opts.idleMs ?? LOG_WRITER_IDLE_MS,
      resourceLimits: workerLimits(opts.batchChars ?? LOG_BATCH_BODY_CHARS),
    });
  }

  /**
   * One transaction a batch: a commit costs the writer ~0.3–0.5 ms whatever the batch's size (a WAL append,
   * the last page of every index rewritten, a new full-text segment), so rows are cheaper the more a batch
   * holds. Handed over in parts of HANDOVER_ROWS with the event loop free between them: one piece of 500
   * rows held it ~5 ms, which every request arriving meanwhile waited.
   */
  async insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult> {
    const batch = ++this.batches;
    const parts: Promise<unknown>[] = [];
    let staged = 0;
    let rejected = 0;
    let from = 0;
    // Encoded here, not in the worker: the message is then arrays of values, which the structured clone
    // copies for about a third of what rows as objects cost (the worker's own loop, on the same core).
    for (; rows.length - from > HANDOVER_ROWS; from += HANDOVER_ROWS) {
      const part = encodeRows(rows.slice(from, from + HANDOVER_ROWS));
      const sent = this.thread.call('stageEncoded', [batch, part.encoded]);
      // Its failure is the batch's, reported below; until then it must not count as an unhandled rejection.
      sent.catch(() => {});
      parts.push(sent);
      staged += part.encoded.length;
      rejected += part.rejected;
      await setImmediate();
    }
    const last = encodeRows(rows.slice(from));
    const args = [batch, staged, last.encoded, rejected + last.rejected];
    const [result] = await Promise.all([this.thread.call<InsertResult>('insertStaged', args), ...parts]);
    return result;
  }

  /** On the writer's own connection, after the batches sent before it (LogWriter.spendSince). */
  spendSince(keyId: string, since: string, endUser?: string): Promise<number> {
    return this.thread.call<number>('spendSince', [keyId, since, endUser]);
  }

  addSpend(entries: readonly SpendEntry[]): Promise<void> {
    return this.thread.call<void>('addSpend', [entries]);
  }

  close(): Promise<void> {
    return this.thread.close();
  }
}

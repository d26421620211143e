/** Worker thread that owns the SQLite request-log writes (see log-writer.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import { SqliteLogStore, type EncodedRow } from './log-store.js';

const { path, cacheMb } = workerData as { path: string; cacheMb?: number };
const store = new SqliteLogStore(path, { cacheMb, trustEncoded: true });
const port = parentPort!;

/**
 * A batch is one transaction: the queue hands over what it holds, up to KEYRELAY_LOG_BATCH_SIZE rows (500).
 * Each commit costs a WAL append, the last page of every index rewritten and a new full-text segment that
 * later merges cost again, whatever its size: measured per row on a 300,000-row log (`bench/log-insert.ts`
 * shape, one core), 17.0 µs in transactions of 100, 15.2 µs in transactions of 500. This thread shares the
 * core with the event loop, which the scheduler gives its turn during a long transaction as during a short
 * one. A failed batch is retried whole; rows already in are skipped (ON CONFLICT DO NOTHING).
 */
// One batch at a time, and close only after the last one.
let work: Promise<void> = Promise.resolve();

port.on('message', (msg: { id: number; rows: EncodedRow[]; rejected: number } | { close: true }) => {
  if ('close' in msg) {
    work = work.then(() => store.close()).then(() => port.close());
    return;
  }
  // A throw inside then() is the rejection the second callback answers with.
  work = work
    .then(() => store.insertEncoded(msg.rows, msg.rejected))
    .then(
      (result) => port.postMessage({ id: msg.id, result }),
      (err: unknown) =>
        port.postMessage({
          id: msg.id,
          error: {
            message: err instanceof Error ? err.message : String(err),
            code: (err as { code?: unknown }).code,
          },
        }),
    );
});

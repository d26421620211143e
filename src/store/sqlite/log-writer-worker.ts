/** Worker thread that owns the SQLite request-log writes (see log-writer.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import type { RequestLogRow } from '../../types.js';
import type { InsertResult } from '../types.js';
import { SqliteLogStore } from './log-store.js';

const store = new SqliteLogStore((workerData as { path: string }).path);
const port = parentPort!;

/**
 * A batch is written in transactions of a few rows with a millisecond's pause between them: on a 2-core host a
 * 100-row transaction holds a core for ~3 ms, and requests in flight queue behind it for the other one
 * (bench: p99 at 500 requests/s with the log on). Each part commits on its own; a failed batch is retried
 * whole, and rows already in are skipped (ON CONFLICT DO NOTHING).
 */
const ROWS_PER_TRANSACTION = 20;
const pause = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

async function insertSpread(rows: readonly RequestLogRow[]): Promise<InsertResult> {
  const total = { inserted: 0, rejected: 0 };
  for (let i = 0; i < rows.length; i += ROWS_PER_TRANSACTION) {
    if (i > 0) await pause();
    const part = await store.insertBatch(rows.slice(i, i + ROWS_PER_TRANSACTION));
    total.inserted += part.inserted;
    total.rejected += part.rejected;
  }
  return total;
}

// One batch at a time, and close only after the last one.
let work: Promise<void> = Promise.resolve();

port.on('message', (msg: { id: number; rows: RequestLogRow[] } | { close: true }) => {
  if ('close' in msg) {
    work = work.then(() => store.close()).then(() => port.close());
    return;
  }
  work = work.then(() =>
    insertSpread(msg.rows).then(
      (result) => port.postMessage({ id: msg.id, result }),
      (err: unknown) =>
        port.postMessage({
          id: msg.id,
          error: {
            message: err instanceof Error ? err.message : String(err),
            code: (err as { code?: unknown }).code,
          },
        }),
    ),
  );
});

/** Worker thread that owns the SQLite request-log writes (see log-writer.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import type { InsertResult } from '../types.js';
import { SqliteLogStore, type EncodedRow } from './log-store.js';

const store = new SqliteLogStore((workerData as { path: string }).path);
const port = parentPort!;

/**
 * A batch is written in transactions of up to 100 rows (the default KEYRELAY_LOG_BATCH_SIZE: one transaction
 * per batch) with a millisecond's pause between them, so a larger batch never holds a core for long while
 * requests wait for it. Each commit costs a WAL append and a new full-text segment whatever its size: per
 * row, 20-row transactions cost ~7 % more CPU than 100-row ones with the full-text index and ~50 % more
 * without (docs/performance.md); on one core the pause bought nothing. Each part commits on its own; a
 * failed batch is retried whole, and rows already in are skipped (ON CONFLICT DO NOTHING).
 */
const ROWS_PER_TRANSACTION = 100;
const pause = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

async function insertSpread(rows: readonly EncodedRow[], rejected: number): Promise<InsertResult> {
  const total = { inserted: 0, rejected };
  for (let i = 0; i < rows.length; i += ROWS_PER_TRANSACTION) {
    if (i > 0) await pause();
    const part = store.insertEncoded(rows.slice(i, i + ROWS_PER_TRANSACTION), 0);
    total.inserted += part.inserted;
    total.rejected += part.rejected;
  }
  return total;
}

// One batch at a time, and close only after the last one.
let work: Promise<void> = Promise.resolve();

port.on('message', (msg: { id: number; rows: EncodedRow[]; rejected: number } | { close: true }) => {
  if ('close' in msg) {
    work = work.then(() => store.close()).then(() => port.close());
    return;
  }
  work = work.then(() =>
    insertSpread(msg.rows, msg.rejected).then(
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

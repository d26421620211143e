/** Worker thread that owns the SQLite request-log writes (see log-writer.ts). */
import { parentPort, workerData } from 'node:worker_threads';
import type { RequestLogRow } from '../../log/record.js';
import { SqliteLogStore } from './log-store.js';

const store = new SqliteLogStore((workerData as { path: string }).path);
const port = parentPort!;

port.on('message', (msg: { id: number; rows: RequestLogRow[] } | { close: true }) => {
  if ('close' in msg) {
    void store.close().then(() => port.close());
    return;
  }
  store.insertBatch(msg.rows).then(
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

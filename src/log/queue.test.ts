import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeLogRow } from '../../test/helpers/log-rows.js';
import { createMetrics } from '../metrics.js';
import { SqliteLogStore } from '../store/sqlite/log-store.js';
import { SqliteLogWriter } from '../store/sqlite/log-writer.js';
import type { RequestLogRow } from '../types.js';
import { LogQueue, type LogQueueOptions } from './queue.js';

let dir: string;
let store: SqliteLogStore;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-queue-'));
  store = new SqliteLogStore(join(dir, 'requests.db'));
  await store.migrate();
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const quiet = pino({ level: 'silent' });
const options = (o: Partial<LogQueueOptions>): LogQueueOptions => ({
  batchSize: 500,
  batchBodyChars: 2 ** 20,
  flushMs: 10_000,
  maxRows: 10_000,
  maxBodyChars: 2 ** 30,
  ...o,
});
const metricValue = async (m: ReturnType<typeof createMetrics>, name: string) =>
  (await m.registry.getSingleMetricAsString(name)).split('\n').filter((l) => !l.startsWith('#'));

describe('LogQueue', () => {
  it('writes rows in batches behind the caller, all of them after flush', async () => {
    const metrics = createMetrics();
    const q = new LogQueue(
      store,
      options({ batchSize: 50, flushMs: 10_000, maxRows: 10_000 }),
      metrics,
      quiet,
    );
    for (let i = 0; i < 175; i++) q.push(makeLogRow({ at: Date.now() + i }));
    expect(q.depth).toBeGreaterThan(0); // push never waits for the store
    expect(await q.flush()).toBe(0);
    expect(await store.count()).toBe(175);
    expect(await metricValue(metrics, 'keyrelay_log_rows_written_total')).toEqual([
      'keyrelay_log_rows_written_total 175',
    ]);
    q.close();
  });

  it('writes a row pushed twice once (idempotent on the request id)', async () => {
    const q = new LogQueue(
      store,
      options({ batchSize: 10, flushMs: 5, maxRows: 100 }),
      createMetrics(),
      quiet,
    );
    const row = makeLogRow();
    q.push(row);
    await q.flush();
    q.push(row);
    await q.flush();
    expect(await store.count()).toBe(1);
    q.close();
  });

  it('keeps the good rows of a batch that holds a poison row, and counts the rejected one', async () => {
    const metrics = createMetrics();
    const q = new LogQueue(store, options({ batchSize: 10, flushMs: 5, maxRows: 100 }), metrics, quiet);
    const poison = { ...makeLogRow(), status: 'not a number' } as unknown as RequestLogRow;
    q.push(makeLogRow({ at: Date.now() }));
    q.push(poison);
    q.push(makeLogRow({ at: Date.now() + 1 }));
    await q.flush();
    expect(await store.count()).toBe(2);
    expect(await metricValue(metrics, 'keyrelay_log_rows_dropped_total')).toEqual([
      'keyrelay_log_rows_dropped_total{reason="rejected"} 1',
    ]);
    q.close();
  });

  it('writes a backlog of rows with bodies at the default limit, in batches the writer can hold', async () => {
    // 600 rows with 64 KB bodies each way (KEYRELAY_BODY_LOG_BYTES' default), as a store outage or a slow
    // disk leaves them queued. One batch of 500 such rows is 64 Mi characters, which killed the writer's
    // worker (its heap limit), and the queue retried that batch for ever: no row was written again.
    const writer = new SqliteLogWriter(join(dir, 'requests.db'));
    const q = new LogQueue(
      writer,
      options({ batchSize: 500, batchBodyChars: 8 * 2 ** 20, flushMs: 60_000, maxRows: 10_000 }),
      createMetrics(),
      quiet,
    );
    const body = 'x'.repeat(65_536);
    for (let i = 0; i < 600; i++)
      q.push(makeLogRow({ at: Date.now() + i, request_body: body, response_body: body }));
    expect(await q.flush(20_000)).toBe(0);
    expect(await store.count()).toBe(600);
    q.close();
    await writer.close();
  }, 30_000);

  it('keeps queuing rows while the store is down, without their bodies past its bound', async () => {
    // The writer's file is in a directory that does not exist yet: every write fails until it does.
    const later = join(dir, 'later');
    const writer = new SqliteLogWriter(join(later, 'requests.db'));
    const metrics = createMetrics();
    const q = new LogQueue(
      writer,
      options({ batchSize: 10, flushMs: 5, maxBodyChars: 300_000 }),
      metrics,
      quiet,
    );
    const body = 'z'.repeat(50_000);
    for (let i = 0; i < 5; i++)
      q.push(
        makeLogRow({ at: Date.now() + i, account_id: 'acct-q', request_body: body, response_body: body }),
      );
    // 100,000 characters a row: the first three fit the bound, the last two are kept without bodies.
    expect(q.depth).toBe(5);
    expect(await metricValue(metrics, 'keyrelay_log_bodies_dropped_total')).toEqual([
      'keyrelay_log_bodies_dropped_total 2',
    ]);
    mkdirSync(later);
    const late = new SqliteLogStore(join(later, 'requests.db'));
    await late.migrate();
    expect(await q.flush(15_000)).toBe(0);
    const page = await late.listRequests({ account_id: 'acct-q' }, { limit: 10 });
    expect(page.items).toHaveLength(5);
    const bodies = await Promise.all(page.items.map((r) => late.getRequest('acct-q', r.id)));
    expect(bodies.map((r) => r?.request_body?.length ?? 0).sort()).toEqual([0, 0, 50_000, 50_000, 50_000]);
    // A body not kept is not "truncated": the console says why it is missing instead.
    expect(bodies.filter((r) => r?.response_body === null && !r.response_body_truncated)).toHaveLength(2);
    q.close();
    await writer.close();
    await late.close();
  }, 30_000);

  it('flush writes every row while writes succeed, however long they take; a failing store stops at the deadline', async () => {
    // At shutdown the first write can start the SQLite writer's worker, which on a loaded machine took longer
    // than the deadline (a test's 600 ms drain): flush gave up after that batch and the rest were lost.
    let calls = 0;
    const slowFirst = {
      insertBatch: async (rows: readonly RequestLogRow[]) => {
        if (calls++ === 0) await new Promise((r) => setTimeout(r, 300));
        return store.insertBatch(rows);
      },
    };
    const q = new LogQueue(slowFirst, options({ batchSize: 2, flushMs: 10_000 }), createMetrics(), quiet);
    for (let i = 0; i < 5; i++) q.push(makeLogRow({ at: Date.now() + i }));
    expect(await q.flush(100)).toBe(0);
    expect(await store.count()).toBe(5);
    q.close();

    const down = { insertBatch: () => Promise.reject(new Error('connection refused')) };
    const stuck = new LogQueue(down, options({ batchSize: 2, flushMs: 10_000 }), createMetrics(), quiet);
    for (let i = 0; i < 3; i++) stuck.push(makeLogRow({ at: Date.now() + i }));
    const t0 = Date.now();
    expect(await stuck.flush(500)).toBe(3);
    expect(Date.now() - t0).toBeLessThan(5_000);
    stuck.close();
  });

  it('drops and counts rows beyond its bound instead of growing or blocking', async () => {
    const metrics = createMetrics();
    const q = new LogQueue(store, options({ batchSize: 1000, flushMs: 10_000, maxRows: 5 }), metrics, quiet);
    for (let i = 0; i < 8; i++) q.push(makeLogRow({ at: Date.now() + i }));
    expect(q.depth).toBe(5);
    expect(await metricValue(metrics, 'keyrelay_log_rows_dropped_total')).toEqual([
      'keyrelay_log_rows_dropped_total{reason="queue_full"} 3',
    ]);
    await q.flush();
    q.close();
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serialize } from 'node:v8';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeLogRow } from '../../../test/helpers/log-rows.js';
import { threadNices } from '../../../test/helpers/thread-nices.js';
import { SqliteLogStore, encodeRows } from './log-store.js';
import { SqliteLogWriter } from './log-writer.js';
import { SqliteWriterStore } from './log-writer-store.js';

let dir: string;
let store: SqliteLogStore;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-writer-'));
  store = new SqliteLogStore(join(dir, 'requests.db'));
  await store.migrate();
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('SqliteLogWriter', () => {
  it.runIf(process.platform === 'linux')(
    'writes on a thread of lower priority than the event loop, leaving the loop as it was',
    async () => {
      const loop = threadNices().get(String(process.pid))!;
      const before = threadNices();
      const writer = new SqliteLogWriter(join(dir, 'requests.db'));
      await writer.insertBatch([makeLogRow({ at: Date.now() })]);
      const lowered = [...threadNices()].filter(([tid, nice]) => !before.has(tid) && nice > loop);
      expect(lowered.map(([, nice]) => nice)).toEqual([Math.min(19, loop + 5)]);
      expect(threadNices().get(String(process.pid))).toBe(loop);
      await writer.close();
    },
  );

  it('writes batches on a worker thread, readable at once from the main connection', async () => {
    const writer = new SqliteLogWriter(join(dir, 'requests.db'));
    const rows = Array.from({ length: 250 }, (_, i) => makeLogRow({ at: Date.now() + i }));
    expect(await writer.insertBatch(rows)).toEqual({ inserted: 250, rejected: 0 });
    expect(await writer.insertBatch(rows)).toEqual({ inserted: 0, rejected: 0 }); // idempotent
    expect(await store.count()).toBe(250);
    await writer.close();
  });

  it('lets an idle worker exit and starts a new one for the next write', async () => {
    const writer = new SqliteLogWriter(join(dir, 'requests.db'), { idleMs: 50 });
    await writer.insertBatch([makeLogRow({ at: Date.now() })]);
    await new Promise((r) => setTimeout(r, 300));
    await writer.insertBatch([makeLogRow({ at: Date.now() + 1 })]);
    expect(await store.count()).toBe(2);
    await writer.close();
  });

  it('holds a row as large as the body settings allow (its heap is sized for the largest batch)', async () => {
    // KEYRELAY_BODY_LOG_BYTES at 64 MiB: one row can carry 128 Mi characters, which killed the worker when
    // its heap was a fixed 64 MB (a batch is cut at LOG_BATCH_BODY_CHARS, but holds at least a row).
    const bodyLogBytes = 64 * 2 ** 20;
    const writer = new SqliteLogWriter(join(dir, 'requests.db'), { batchChars: 2 * bodyLogBytes });
    const body = 'y'.repeat(bodyLogBytes);
    const r = await writer.insertBatch([makeLogRow({ request_body: body, response_body: body })]);
    expect(r).toEqual({ inserted: 1, rejected: 0 });
    await writer.close();
  }, 30_000);

  it('reports a poison row as rejected and keeps the rest of its batch', async () => {
    // The worker's connection skips the table's CHECKs: encoding must refuse what they would have.
    const writer = new SqliteLogWriter(join(dir, 'requests.db'));
    const poison = (column: string, value: unknown) => ({ ...makeLogRow(), [column]: value });
    const r = await writer.insertBatch([
      makeLogRow({ at: Date.now() }),
      poison('outcome', 'exploded'),
      poison('provider', 'Not a provider!'),
      poison('usage_source', 'guessed'),
      poison('properties', { n: 1n }),
      makeLogRow({ at: Date.now() + 1 }),
    ]);
    expect(r).toEqual({ inserted: 2, rejected: 4 });
    expect(await store.count()).toBe(2);
    await writer.close();
  });

  it('writes a batch handed over in parts whole, counting a poison row in any part', async () => {
    const writer = new SqliteLogWriter(join(dir, 'requests.db'));
    const rows = Array.from({ length: 120 }, (_, i) => makeLogRow({ at: Date.now() + i }));
    const poison = (i: number, column: string, value: unknown) =>
      (rows[i] = { ...rows[i]!, [column]: value });
    poison(3, 'outcome', 'exploded');
    poison(118, 'provider', 'Not a provider!');
    expect(await writer.insertBatch(rows)).toEqual({ inserted: 118, rejected: 2 });
    expect(await store.count()).toBe(118);
    await writer.close();
  });

  it('refuses a batch whose first parts did not reach the thread that writes it, and writes none of it', async () => {
    // What a worker started between the parts of a batch sees: the queue keeps the batch and sends it again.
    const rows = Array.from({ length: 30 }, (_, i) => makeLogRow({ at: Date.now() + i }));
    const { encoded } = encodeRows(rows);
    const writerStore = new SqliteWriterStore(join(dir, 'requests.db'));
    writerStore.stageEncoded(1, encoded.slice(0, 10));
    writerStore.stageEncoded(1, encoded.slice(10, 20));
    expect(() => writerStore.insertStaged(2, 20, encoded.slice(20), 0)).toThrow(/0 of its 20 staged rows/);
    expect(() => writerStore.insertStaged(1, 20, encoded.slice(20), 0)).toThrow(/0 of its 20 staged rows/);
    expect(await store.count()).toBe(0);
    writerStore.stageEncoded(3, encoded.slice(0, 10));
    writerStore.stageEncoded(3, encoded.slice(10, 20));
    expect(writerStore.insertStaged(3, 20, encoded.slice(20), 1)).toEqual({ inserted: 30, rejected: 1 });
    expect(await store.count()).toBe(30);
    await writerStore.close();
  });

  it('sends each row as a dense array, which the structured clone copies in its fast form', () => {
    // A holey array (new Array(n) filled in) is written index by index: 2.5× the time on the event loop,
    // 2.2× in the writer reading it back. The serialized form names the kind: 'A' dense, 'a' sparse.
    // Hot enough for the optimizing compiler, whose inlined Array.prototype.map allocates a holey array.
    const rows = Array.from({ length: 200 }, (_, i) => makeLogRow({ at: Date.now() + i }));
    let encoded: unknown[] = [];
    for (let i = 0; i < 200; i++) encoded = encodeRows(rows).encoded;
    const bytes = serialize(encoded[199]);
    expect(String.fromCharCode(bytes[2]!)).toBe('A'); // after the version header (0xFF, version)
  });
});

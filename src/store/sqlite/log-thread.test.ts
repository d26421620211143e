import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fillLog, makeLogRow } from '../../../test/helpers/log-rows.js';
import { threadNices } from '../../../test/helpers/thread-nices.js';
import { DomainError } from '../../errors.js';
import { SqliteLogThread } from './log-thread.js';

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-log-thread-'));
  path = join(dir, 'requests.db');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('SqliteLogThread', () => {
  it('answers a long query on its own thread: the event loop keeps turning meanwhile', async () => {
    const store = new SqliteLogThread(path);
    await store.migrate();
    const at = Date.now() - 60_000;
    fillLog(path, 300_000, { at, key_id: 'key-1' });
    // Before: the query ran inside the call, so no timer could fire until it had returned.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const t0 = performance.now();
    const spend = await store.spendSince('key-1', new Date(at - 3_600_000).toISOString());
    const took = performance.now() - t0;
    clearInterval(timer);
    expect(spend).toBeCloseTo(300_000 * 0.000123456789, 6);
    expect(took).toBeGreaterThan(10); // enough rows that the query takes a while on any machine
    expect(ticks).toBeGreaterThan(0);
    await store.close();
  }, 60_000);

  it.runIf(process.platform === 'linux')(
    "reads at the lowest priority, and writes (the prune, the batch ledger) at the log writer's",
    async () => {
      const store = new SqliteLogThread(path);
      await store.migrate();
      const loop = threadNices().get(String(process.pid))!;
      const known = new Set(threadNices().keys());
      const started = () => {
        // Only the lowered ones: a worker's first start may add threads of Node's own, at the loop's nice.
        const added = [...threadNices()].filter(([tid]) => !known.has(tid));
        for (const [tid] of added) known.add(tid);
        return added.filter(([, nice]) => nice > loop).map(([, nice]) => nice);
      };
      try {
        await store.usageSeries({ account_id: 'acct-1' }, 'day');
        expect(started()).toEqual([19]);
        await store.prune(new Date().toISOString());
        expect(started()).toEqual([Math.min(19, loop + 5)]);
        expect(threadNices().get(String(process.pid))).toBe(loop);
      } finally {
        await store.close();
      }
    },
  );

  it('rebuilds the store refusals the console maps to 400s', async () => {
    const store = new SqliteLogThread(path);
    await store.migrate();
    const refused = store.listRequests({ account_id: 'acct-1' }, { limit: 10, cursor: 'not-a-cursor' });
    await expect(refused).rejects.toBeInstanceOf(DomainError);
    await expect(refused).rejects.toMatchObject({ code: 'invalid_cursor' });
    await store.close();
  });

  it('finds a batch by its output file once the write that linked it was handed over, whichever thread is quicker', async () => {
    const store = new SqliteLogThread(path);
    await store.migrate();
    try {
      await store.count(); // the reading thread is up; the writing thread starts with the next write
      const linked = store.upsertBatch({
        provider: 'openai',
        batch_id: 'batch_1',
        key_id: 'key-1',
        account_id: 'acct-1',
        at: new Date().toISOString(),
        created_here: false,
        status: 'completed',
        request_counts: {},
        output_file_id: 'file-out-1',
      });
      const found = await store.batchByOutputFile('acct-1', 'openai', 'file-out-1');
      await linked;
      expect(found?.batch_id).toBe('batch_1');
    } finally {
      await store.close();
    }
  });

  it('lets an idle worker exit and starts a new one for the next call', async () => {
    const store = new SqliteLogThread(path, { idleMs: 50 });
    await store.migrate();
    const running = () => store['reads']['current'] !== null || store['writes']['current'] !== null;
    await store.insertBatch([makeLogRow({ at: Date.now() })]);
    expect(running()).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(running()).toBe(false);
    expect(await store.count()).toBe(1);
    await store.close();
    // Closed for good: a late call starts no worker (one would keep the process alive after its stop).
    await expect(store.count()).rejects.toThrow('closed');
    expect(running()).toBe(false);
  });
});

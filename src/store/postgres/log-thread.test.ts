import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeLogRow } from '../../../test/helpers/log-rows.js';
import { threadNices } from '../../../test/helpers/thread-nices.js';
import { createTestDatabase, type TestDatabase } from '../../../test/helpers/pg.js';
import { DomainError } from '../../errors.js';
import { PgLogStore } from './log-store.js';
import { PgLogThread } from './log-thread.js';

const AT = Date.parse('2026-03-01T10:00:00.000Z');
let db: TestDatabase;
let direct: PgLogStore;
beforeAll(async () => {
  db = await createTestDatabase();
  direct = new PgLogStore(db.url);
  await direct.migrate();
  await direct.insertBatch([makeLogRow({ at: AT, model: 'gpt-4o', cost_usd: 0.5 })]);
});
afterAll(async () => {
  await direct.close();
  await db.drop();
});

describe('PgLogThread', () => {
  it.runIf(process.platform === 'linux')(
    "answers the console's reads on a thread below the event loop's priority, and writes on the loop's pool",
    async () => {
      const loop = threadNices().get(String(process.pid))!;
      const before = threadNices();
      const store = new PgLogThread(db.url);
      const lowered = () => [...threadNices()].filter(([tid, nice]) => !before.has(tid) && nice > loop);
      try {
        const rows = [makeLogRow({ at: AT + 1, model: 'gpt-4o-mini', cost_usd: 0.25 })];
        expect(await store.insertBatch(rows)).toEqual({ inserted: 1, rejected: 0 });
        expect(lowered()).toEqual([]);
        const filter = { account_id: 'acct-1' };
        const byModel = await store.usageBreakdown(filter, 'model');
        expect(lowered().map(([, nice]) => nice)).toEqual([19]);
        expect(byModel).toEqual(await direct.usageBreakdown(filter, 'model'));
        expect(await store.listRequests(filter, { limit: 10 })).toEqual(
          await direct.listRequests(filter, { limit: 10 }),
        );
        expect(threadNices().get(String(process.pid))).toBe(loop);
      } finally {
        await store.close();
      }
    },
  );

  it('gives a read its domain error, and lets an idle thread exit and start again', async () => {
    const store = new PgLogThread(db.url, { idleMs: 50 });
    try {
      const bad = store.listRequests({ account_id: 'acct-1' }, { limit: 10, cursor: 'not-a-cursor' });
      await expect(bad).rejects.toBeInstanceOf(DomainError);
      await expect(bad).rejects.toMatchObject({ code: 'invalid_cursor' });
      await new Promise((r) => setTimeout(r, 300));
      const page = await store.listRequests({ account_id: 'acct-1' }, { limit: 10 });
      expect(page.items.length).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });

  it('refuses a read after close instead of starting a thread that would hold the process open', async () => {
    const store = new PgLogThread(db.url);
    await store.close();
    await expect(store.usageSeries({ account_id: 'acct-1' }, 'day')).rejects.toThrow(/closed/);
  });
});

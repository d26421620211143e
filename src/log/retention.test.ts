import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeLogRow } from '../../test/helpers/log-rows.js';
import { SqliteLogStore } from '../store/sqlite/log-store.js';
import { startRetention } from './retention.js';

const DAY = 86_400_000;
let dir: string;
let store: SqliteLogStore;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-retention-'));
  store = new SqliteLogStore(join(dir, 'requests.db'));
  await store.migrate();
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('retention', () => {
  it('deletes rows past the retention age and bodies past the body retention age', async () => {
    const now = Date.now();
    const old = makeLogRow({ at: now - 40 * DAY });
    const middle = makeLogRow({ at: now - 10 * DAY, account_id: 'acct-1' });
    const fresh = makeLogRow({ at: now - DAY, account_id: 'acct-1' });
    await store.insertBatch([old, middle, fresh]);
    const r = startRetention(store, { retentionDays: 30, bodyRetentionDays: 7 }, (err) => {
      throw err;
    });
    await r.runOnce();
    r.stop();
    expect(await store.count()).toBe(2);
    expect((await store.getRequest('acct-1', middle.id))?.request_body).toBeNull();
    expect((await store.getRequest('acct-1', fresh.id))?.request_body).toBe(fresh.request_body);
  });

  it('keeps everything when retention is 0', async () => {
    await store.insertBatch([makeLogRow({ at: Date.now() - 400 * DAY })]);
    const r = startRetention(store, { retentionDays: 0, bodyRetentionDays: 0 }, () => {});
    await r.runOnce();
    r.stop();
    expect(await store.count()).toBe(1);
  });
});

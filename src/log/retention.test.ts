import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeLogRow } from '../../test/helpers/log-rows.js';
import { createTestDatabase } from '../../test/helpers/pg.js';
import { PgConfigStore } from '../store/postgres/config-store.js';
import { PgLogStore } from '../store/postgres/log-store.js';
import { SqliteConfigStore } from '../store/sqlite/config-store.js';
import { SqliteLogStore } from '../store/sqlite/log-store.js';
import type { ConfigStore, LogStore } from '../store/types.js';
import { startRetention } from './retention.js';

const DAY = 86_400_000;

/** Both stores, as the server opens them: the config store and the request log. */
const STORES: [string, () => Promise<{ store: LogStore; config: ConfigStore; cleanup(): Promise<void> }>][] =
  [
    [
      'SQLite',
      () => {
        const dir = mkdtempSync(join(tmpdir(), 'keyrelay-retention-'));
        const store = new SqliteLogStore(join(dir, 'requests.db'));
        const config = new SqliteConfigStore(join(dir, 'keyrelay.db'));
        return Promise.resolve({
          store,
          config,
          cleanup: () => Promise.resolve(rmSync(dir, { recursive: true, force: true })),
        });
      },
    ],
    [
      'PostgreSQL',
      async () => {
        const db = await createTestDatabase();
        return { store: new PgLogStore(db.url), config: new PgConfigStore(db.url), cleanup: () => db.drop() };
      },
    ],
  ];

describe.each(STORES)('retention on %s', (_, open) => {
  let store: LogStore;
  let config: ConfigStore;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    const opened = await open();
    ({ store, config } = opened);
    cleanup = () => opened.cleanup();
    await store.migrate();
    await config.migrate();
    for (const id of ['acct-1', 'acct-2'])
      await config.createAccount({ id, email: `${id}@example.com`, password_hash: 'x' });
  });
  afterEach(async () => {
    await store.close();
    await config.close();
    await cleanup();
  });

  const run = async (retentionDays: number) => {
    const r = startRetention(store, config, { retentionDays }, (err) => {
      throw err;
    });
    await r.runOnce();
    r.stop();
  };

  it("deletes rows past the retention age, and bodies past an account's own body retention", async () => {
    const now = Date.now();
    const old = makeLogRow({ at: now - 40 * DAY, account_id: 'acct-1' });
    const middle = makeLogRow({ at: now - 10 * DAY, account_id: 'acct-1' });
    const fresh = makeLogRow({ at: now - DAY, account_id: 'acct-1' });
    const othersMiddle = makeLogRow({ at: now - 10 * DAY, account_id: 'acct-2' });
    await store.insertBatch([old, middle, fresh, othersMiddle]);
    await config.setAccountSettings('acct-1', { body_retention_days: 7 });
    await run(30);
    expect(await store.count()).toBe(3);
    expect((await store.getRequest('acct-1', middle.id))?.request_body).toBeNull();
    expect((await store.getRequest('acct-1', middle.id))?.response_body).toBeNull();
    expect((await store.getRequest('acct-1', fresh.id))?.request_body).toBe(fresh.request_body);
    // An account without the setting keeps bodies as long as the rows.
    expect((await store.getRequest('acct-2', othersMiddle.id))?.request_body).toBe(othersMiddle.request_body);
  });

  it('drops bodies on their own when rows are kept forever', async () => {
    const row = makeLogRow({ at: Date.now() - 400 * DAY, account_id: 'acct-2' });
    await store.insertBatch([row]);
    await config.setAccountSettings('acct-2', { body_retention_days: 1 });
    await run(0);
    expect(await store.count()).toBe(1);
    expect((await store.getRequest('acct-2', row.id))?.request_body).toBeNull();
  });

  it('keeps everything when retention is 0 and no account drops bodies sooner', async () => {
    const row = makeLogRow({ at: Date.now() - 400 * DAY, account_id: 'acct-1' });
    await store.insertBatch([row]);
    await run(0);
    expect(await store.getRequest('acct-1', row.id)).toEqual(row);
  });

  it("deletes audit entries past their organization's audit retention, and only those", async () => {
    const now = Date.now();
    const entry = (org: string, daysAgo: number) => ({
      id: `${org}-${daysAgo}`,
      org_id: org,
      at: new Date(now - daysAgo * DAY).toISOString(),
      actor_id: org,
      actor_email: `${org}@example.com`,
      action: 'key.create',
      target: null,
      ip: '127.0.0.1',
      user_agent: null,
      before: null,
      after: { name: 'k' },
    });
    // acct-1 keeps 30 days; acct-2 (no setting) keeps everything.
    for (const e of [entry('acct-1', 45), entry('acct-1', 29), entry('acct-1', 1), entry('acct-2', 400)])
      await config.appendAudit(e);
    await config.setAuditRetention('acct-1', 30);
    // Even with the table's triggers in place, a write of an entry still kept is refused.
    await expect(config.pruneAudit()).resolves.toBe(1);
    await config.appendAudit(entry('acct-1', 31));
    await run(0);
    const ids = async (org: string) => (await config.listAudit({ org_id: org, limit: 10 })).map((e) => e.id);
    expect((await ids('acct-1')).sort()).toEqual(['acct-1-1', 'acct-1-29']);
    expect(await ids('acct-2')).toEqual(['acct-2-400']);
    // Setting it shorter applies at the next run; clearing it keeps what is left for good.
    await config.setAuditRetention('acct-1', 7);
    await run(0);
    expect(await ids('acct-1')).toEqual(['acct-1-1']);
    await config.setAuditRetention('acct-1', null);
    await config.appendAudit(entry('acct-1', 5000));
    await run(0);
    expect((await ids('acct-1')).sort()).toEqual(['acct-1-1', 'acct-1-5000']);
  });
});

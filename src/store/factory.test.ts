import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../test/helpers/pg.js';
import { openStores } from './factory.js';

describe('openStores', () => {
  it('opens two SQLite files under a data dir it creates, migrated and ready', async () => {
    const root = mkdtempSync(join(tmpdir(), 'keyrelay-factory-'));
    const dataDir = join(root, 'nested', 'data');
    try {
      const stores = await openStores({ dataDir, databaseUrl: null });
      expect(stores.kind).toBe('sqlite');
      expect(existsSync(join(dataDir, 'keyrelay.db'))).toBe(true);
      expect(existsSync(join(dataDir, 'requests.db'))).toBe(true);
      expect(await stores.configStore.ensureSecret('s', 'v')).toBe('v');
      expect(await stores.logStore.count()).toBe(0);
      await stores.configStore.close();
      await stores.logStore.close();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('uses PostgreSQL for both stores when a database URL is set', async () => {
    const db = await createTestDatabase('keyrelay_factory');
    try {
      const stores = await openStores({ dataDir: '/nonexistent/never-created', databaseUrl: db.url });
      expect(stores.kind).toBe('postgres');
      expect(await stores.configStore.ensureSecret('s', 'v')).toBe('v');
      expect(await stores.logStore.count()).toBe(0);
      await stores.configStore.close();
      await stores.logStore.close();
      expect(existsSync('/nonexistent/never-created')).toBe(false);
    } finally {
      await db.drop();
    }
  });
});

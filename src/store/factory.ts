/** The one place that picks and imports concrete stores: PostgreSQL when a URL is set, else SQLite files. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { SqliteConfigStore } from './sqlite/config-store.js';
import { SqliteLogStore } from './sqlite/log-store.js';
import type { ConfigStore, LogStore } from './types.js';

export interface Stores {
  configStore: ConfigStore;
  logStore: LogStore;
  kind: 'sqlite' | 'postgres';
}

/** Opens both stores and runs their migrations. */
export async function openStores(config: Pick<Config, 'dataDir' | 'databaseUrl'>): Promise<Stores> {
  if (config.databaseUrl) {
    throw new Error('PostgreSQL stores are not available yet');
  }
  mkdirSync(config.dataDir, { recursive: true });
  const configStore = new SqliteConfigStore(join(config.dataDir, 'keyrelay.db'));
  const logStore = new SqliteLogStore(join(config.dataDir, 'requests.db'));
  await configStore.migrate();
  await logStore.migrate();
  return { configStore, logStore, kind: 'sqlite' };
}

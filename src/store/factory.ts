/** The one place that picks and imports concrete stores: PostgreSQL when a URL is set, else SQLite files. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { SqliteConfigStore } from './sqlite/config-store.js';
import { SqliteLogThread } from './sqlite/log-thread.js';
import { SqliteLogWriter } from './sqlite/log-writer.js';
import { defaultSqliteDriver, type SqliteDriverName } from './sqlite/driver.js';
import { LOG_BATCH_BODY_CHARS, type ConfigStore, type LogStore } from './types.js';

/** What the write-behind log queue needs: batched inserts, off the event loop where the store is synchronous. */
export interface LogWriter {
  insertBatch: LogStore['insertBatch'];
  /**
   * A budget's spend so far, read in line with the writes: it counts exactly the batches whose last part was
   * handed over before it. The limits count what they record while it loads, so a read that waited elsewhere
   * (behind console queries on SQLite's reader) while the writer wrote those rows counted them twice.
   */
  spendSince: LogStore['spendSince'];
  /** Spend kept without rows (the request log off), in line with the writes too. */
  addSpend: LogStore['addSpend'];
  close(): Promise<void>;
}

export interface Stores {
  configStore: ConfigStore;
  logStore: LogStore;
  logWriter: LogWriter;
  kind: 'sqlite' | 'postgres';
  /** What serve logs at start: on SQLite, which driver this Node uses (src/node-support.ts). */
  driver: SqliteDriverName | 'pg';
}

/** Opens both stores and runs their migrations. */
export async function openStores(
  config: Pick<Config, 'dataDir' | 'databaseUrl'> &
    Partial<Pick<Config, 'logSearch' | 'logWriterIdleMs' | 'bodyLogBytes'>>,
  /** Told what migrating did that an operator should know of (a search index dropped or rebuilt). */
  notify?: (msg: string) => void,
): Promise<Stores> {
  const search = {
    search: config.logSearch?.enabled,
    searchBodyChars: config.logSearch?.bodyChars,
    searchScanRows: config.logSearch?.scanRows,
    onSearchIndex: notify,
  };
  if (config.databaseUrl) {
    // Each store owns a pool on the URL; close() ends it. Loaded only when used: pg is memory a SQLite
    // deployment does not need.
    const { PgConfigStore } = await import('./postgres/config-store.js');
    const { PgLogThread } = await import('./postgres/log-thread.js');
    const configStore = new PgConfigStore(config.databaseUrl);
    // The console's reads on a worker thread with a pool of its own (src/store/postgres/log-thread.ts).
    const logStore = new PgLogThread(config.databaseUrl, search);
    await migrateOrClose(configStore, logStore);
    // pg is asynchronous already: the store's pool on the event loop writes without blocking it.
    const logWriter = {
      insertBatch: logStore.insertBatch.bind(logStore),
      spendSince: logStore.spendSince.bind(logStore),
      addSpend: logStore.addSpend.bind(logStore),
      close: () => Promise.resolve(),
    };
    return { configStore, logStore, logWriter, kind: 'postgres', driver: 'pg' };
  }
  mkdirSync(config.dataDir, { recursive: true });
  const configStore = new SqliteConfigStore(join(config.dataDir, 'keyrelay.db'));
  const logPath = join(config.dataDir, 'requests.db');
  // Queried on a worker thread; the writer has its own (SQLite is synchronous: src/store/sqlite/log-thread.ts).
  const logStore = new SqliteLogThread(logPath, search);
  await migrateOrClose(configStore, logStore);
  const driver = defaultSqliteDriver();
  return {
    configStore,
    logStore,
    logWriter: new SqliteLogWriter(logPath, {
      idleMs: config.logWriterIdleMs,
      // A batch stops at LOG_BATCH_BODY_CHARS, but holds at least one row, whose two bodies may be larger.
      batchChars: Math.max(LOG_BATCH_BODY_CHARS, 2 * (config.bodyLogBytes ?? 0)),
    }),
    kind: 'sqlite',
    driver,
  };
}

/** A failed migration closes both stores, so a refused start leaves no pool or file handle open. */
async function migrateOrClose(configStore: ConfigStore, logStore: LogStore): Promise<void> {
  try {
    await configStore.migrate();
    await logStore.migrate();
  } catch (err) {
    await Promise.allSettled([configStore.close(), logStore.close()]);
    throw err;
  }
}

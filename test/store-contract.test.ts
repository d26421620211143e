/**
 * The store contract: every method of ConfigStore and LogStore, run on SQLite and on PostgreSQL with the
 * same expectations (as bifrost's logstore parity test). PostgreSQL is never skipped: if it is unreachable,
 * this suite fails. SQLite runs on the driver this Node uses (better-sqlite3 on 20, node:sqlite on 22+);
 * CI runs the suite on Node 20, 22 and 24, so each driver is held to the same contract. Each log store runs
 * twice: on the caller's thread, and as the server opens it, with its reads on a worker thread.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { PgConfigStore } from '../src/store/postgres/config-store.js';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { PgLogThread } from '../src/store/postgres/log-thread.js';
import { SqliteConfigStore } from '../src/store/sqlite/config-store.js';
import { defaultSqliteDriver, type SqliteDriverName } from '../src/store/sqlite/driver.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { SqliteLogThread } from '../src/store/sqlite/log-thread.js';
import type { ConfigStore, LogStore } from '../src/store/types.js';
import { describeConfigStoreContract } from './helpers/config-contract.js';
import { describeLogStoreContract } from './helpers/log-contract.js';
import { describeSessionContract } from './helpers/session-contract.js';
import { describeUsageRollupContract } from './helpers/rollup-contract.js';
import { createTestDatabase } from './helpers/pg.js';

interface Backend {
  name: string;
  /** Prepares an empty database; returns its cleanup. */
  setup(): Promise<() => Promise<void>>;
  openConfig(): ConfigStore;
  openLog(opts?: { rollupMinRows?: number }): LogStore;
}

/** `thread`: the log store the server uses, each call on a worker thread (log-thread.ts). */
function sqliteBackend(driver: SqliteDriverName, thread = false): Backend {
  let dir = '';
  return {
    name: `sqlite (${driver}${thread ? ', worker thread' : ''})`,
    setup() {
      dir = mkdtempSync(join(tmpdir(), 'keyrelay-store-'));
      return Promise.resolve(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
    },
    openConfig: () => new SqliteConfigStore(join(dir, 'keyrelay.db'), { driver }),
    openLog: (opts = {}) =>
      thread
        ? new SqliteLogThread(join(dir, 'requests.db'), { driver, ...opts })
        : new SqliteLogStore(join(dir, 'requests.db'), { driver, ...opts }),
  };
}

/** `thread`: the log store the server uses, the console's reads on a worker thread (postgres/log-thread.ts). */
function postgresBackend(thread = false): Backend {
  let url = '';
  return {
    name: `postgres${thread ? ' (worker thread)' : ''}`,
    async setup() {
      const db = await createTestDatabase();
      url = db.url;
      return () => db.drop();
    },
    openConfig: () => new PgConfigStore(url),
    openLog: (opts = {}) => (thread ? new PgLogThread(url, opts) : new PgLogStore(url, opts)),
  };
}

const backends: Backend[] = [
  sqliteBackend(defaultSqliteDriver()),
  sqliteBackend(defaultSqliteDriver(), true),
  postgresBackend(),
  postgresBackend(true),
];

describe.each(backends)('store contract on $name', (backend) => {
  const opened: { close(): Promise<void> }[] = [];
  let configStore: ConfigStore;
  let logStore: LogStore;
  let cleanup: () => Promise<void> = () => Promise.resolve();

  beforeAll(async () => {
    cleanup = await backend.setup();
    configStore = backend.openConfig();
    logStore = backend.openLog();
    // Two instances starting at once on an empty database: each migration must still apply exactly once.
    const twins = [backend.openConfig(), backend.openLog()];
    opened.push(configStore, logStore, ...twins);
    await Promise.all([configStore, logStore, ...twins].map((s) => s.migrate()));
    await configStore.migrate(); // a second run finds nothing to do
    await logStore.migrate();
  });

  afterAll(async () => {
    for (const s of opened) await s.close();
    await cleanup();
  });

  describe('ConfigStore', () => {
    describeConfigStoreContract({
      store: () => configStore,
      openAnother: async () => {
        const s = backend.openConfig();
        opened.push(s);
        await s.migrate();
        return s;
      },
    });
  });

  describe('LogStore', () => {
    describeLogStoreContract({ store: () => logStore });
  });

  describe('LogStore sessions', () => {
    describeSessionContract({ store: () => logStore });
  });

  describe('LogStore usage rollup', () => {
    const open = (rollupMinRows: number) => {
      const s = backend.openLog({ rollupMinRows });
      opened.push(s);
      return s;
    };
    describeUsageRollupContract({ rolled: () => open(0), rows: () => open(Infinity) });
  });
});

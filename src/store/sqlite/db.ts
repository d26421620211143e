/** Opening a SQLite file the way both stores want it, and the numbered-migration runner they share. */
import { openConnection, type Connection, type OpenOptions, type Statement } from './driver.js';

export type Db = Connection;

/** KEYRELAY_SQLITE_CACHE_MB's default: SQLite's own. */
export const DEFAULT_SQLITE_CACHE_MB = 2;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function openSqlite(path: string, opts: OpenOptions = {}): Db {
  const db = openConnection(path, opts);
  // WAL lets the console read while the log writer writes; NORMAL is durable across app crashes in WAL mode.
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec('PRAGMA foreign_keys = ON');
  // Set, not left to the driver: better-sqlite3 is built with a 16 MB cache, node:sqlite has SQLite's 2 MB.
  db.exec(`PRAGMA cache_size = -${Math.round((opts.cacheMb ?? DEFAULT_SQLITE_CACHE_MB) * 1024)}`);
  return db;
}

/** Applies the migrations not yet recorded in schema_migrations, each in its own transaction, in order. */
export function runSqliteMigrations(db: Db, migrations: readonly Migration[]): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`);
  const applied = db.prepare<[number], { version: number }>(
    'SELECT version FROM schema_migrations WHERE version = ?',
  );
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    // IMMEDIATE takes the write lock before the check, so a second process starting at once waits, then skips.
    db.transaction(
      () => {
        if (applied.get(m.version)) return;
        db.exec(m.sql);
        record.run(m.version, m.name, new Date().toISOString());
      },
      { immediate: true },
    );
  }
}

export type StatementCache = <P extends unknown[] = unknown[], R = unknown>(sql: string) => Statement<P, R>;

/** Compiles each SQL text once; the stores only build a bounded set of texts (one per filter combination). */
export function createStatementCache(db: Db): StatementCache {
  const cache = new Map<string, Statement>();
  return <P extends unknown[], R>(sql: string) => {
    let s = cache.get(sql);
    if (!s) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s as Statement<P, R>;
  };
}

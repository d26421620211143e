/** Opening a SQLite file the way both stores want it, and the numbered-migration runner they share. */
import { openConnection, type Connection, type OpenOptions, type Statement } from './driver.js';

export type Db = Connection;

/**
 * Each connection's page cache, MB: SQLite's own default and node:sqlite's. better-sqlite3 is built with
 * 16 MB, which the log writer filled under load for no measured gain in its inserts.
 */
export const SQLITE_CACHE_MB = 2;

/** SQL, or a step that reads the schema first (a table rebuilt from its own definition). */
export type Migration = { version: number; name: string } & ({ sql: string } | { apply(db: Db): void });

export function openSqlite(path: string, opts: OpenOptions = {}): Db {
  const db = openConnection(path, opts);
  // WAL lets the console read while the log writer writes; NORMAL is durable across app crashes in WAL mode.
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec('PRAGMA foreign_keys = ON');
  // Set, not left to the driver: better-sqlite3 is built with a 16 MB cache, node:sqlite has SQLite's 2 MB.
  db.exec(`PRAGMA cache_size = -${Math.round((opts.cacheMb ?? SQLITE_CACHE_MB) * 1024)}`);
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
        if ('sql' in m) db.exec(m.sql);
        else m.apply(db);
        record.run(m.version, m.name, new Date().toISOString());
      },
      { immediate: true },
    );
  }
}

/**
 * Rebuilds a table as its current definition with `edit` applied (SQLite alters no constraint in place):
 * the rows with their rowids (an FTS index over the table stays valid), then its indexes and triggers as
 * they were. SQLite's documented procedure (https://sqlite.org/lang_altertable.html, "Making Other Kinds Of
 * Table Schema Changes"); run inside the migration's transaction.
 */
export function rebuildTable(db: Db, table: string, edit: (createSql: string) => string): void {
  const schema = db.prepare<[string], { type: string; sql: string | null }>(
    'SELECT type, sql FROM sqlite_schema WHERE tbl_name = ? ORDER BY rowid',
  );
  const rows = schema.all(table);
  const create = rows.find((r) => r.type === 'table')?.sql;
  if (!create) throw new Error(`no table ${table}`);
  const rebuilt = `${table}_rebuilt`;
  // A table that was itself renamed into place is stored with its name quoted.
  const head = new RegExp(`^CREATE TABLE (?:"${table}"|${table}\\b)`);
  if (!head.test(create)) throw new Error(`unexpected definition of ${table}`);
  const columns = db
    .prepare<[], { name: string }>(`SELECT name FROM pragma_table_info('${table}')`)
    .all()
    .map((c) => `"${c.name}"`)
    .join(', ');
  const withoutRowid = /\bWITHOUT\s+ROWID\b/i.test(create.slice(create.lastIndexOf(')')));
  const copied = withoutRowid ? columns : `rowid, ${columns}`;
  // Views that read the table go while it is renamed (a rename checks every view) and come back as they were.
  const views = db
    .prepare<[], { name: string; sql: string }>("SELECT name, sql FROM sqlite_schema WHERE type = 'view'")
    .all()
    .filter((v) => new RegExp(`\\b${table}\\b`).test(v.sql));
  db.exec(edit(create).replace(head, `CREATE TABLE ${rebuilt}`));
  db.exec(`INSERT INTO ${rebuilt} (${copied}) SELECT ${copied} FROM ${table}`);
  for (const v of views) db.exec(`DROP VIEW "${v.name}"`);
  db.exec(`DROP TABLE ${table}`);
  db.exec(`ALTER TABLE ${rebuilt} RENAME TO ${table}`);
  for (const v of views) db.exec(v.sql);
  for (const r of rows) if (r.type !== 'table' && r.sql) db.exec(r.sql);
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

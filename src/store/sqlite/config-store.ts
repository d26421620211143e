/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/**
 * ConfigStore on SQLite (driver.ts): synchronous inside, promises outside to fit the interface.
 * Small and read-mostly; the request log lives in a separate file (SqliteLogStore).
 */
import { EmailTakenError, normalizeStoredEmail } from '../errors.js';
import { toIso, toIsoOrNull } from '../time.js';
import type { Provider } from '../../types.js';
import type {
  Account,
  AccountWithSecret,
  ConfigStore,
  KeyChanges,
  KeyLimits,
  KeyRecord,
  SessionRecord,
} from '../types.js';
import {
  createStatementCache,
  openSqlite,
  runSqliteMigrations,
  type Db,
  type StatementCache,
  type Migration,
} from './db.js';
import type { OpenOptions } from './driver.js';

export const CONFIG_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'accounts, keys, sessions, secrets',
    sql: `
      CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        password_changed_at TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE TABLE keys (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        hash TEXT NOT NULL,
        hint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        expires_at TEXT,
        revoked_at TEXT
      );
      CREATE UNIQUE INDEX keys_hash ON keys(hash);
      CREATE INDEX keys_account ON keys(account_id);
      CREATE TABLE sessions (
        id_hash TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX sessions_account ON sessions(account_id);
      CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'key limits',
    // Lists are JSON arrays in TEXT; NULL everywhere means "no limit".
    sql: `
      ALTER TABLE keys ADD COLUMN allowed_providers TEXT CHECK (allowed_providers IS NULL OR json_valid(allowed_providers));
      ALTER TABLE keys ADD COLUMN allowed_models TEXT CHECK (allowed_models IS NULL OR json_valid(allowed_models));
      ALTER TABLE keys ADD COLUMN rate_limit_rpm INTEGER;
      ALTER TABLE keys ADD COLUMN budget_usd REAL;
      ALTER TABLE keys ADD COLUMN budget_period TEXT CHECK (budget_period IS NULL OR budget_period IN ('day', 'month'));
    `,
  },
  {
    version: 3,
    name: 'key change feed',
    // Every instance polls this feed (src/keys/change-feed.ts) to drop changed keys from its cache without
    // Redis. Triggers, not store methods, append to it, so no writer can change a key and skip the feed
    // (an operator's SQL included); last_used_at is not in the column list, so touchKeys stays silent.
    // AUTOINCREMENT: a pruned seq is never reused. Writes are serialized, so seq order is commit order.
    sql: `
      CREATE TABLE key_changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        key_id TEXT NOT NULL,
        at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
      );
      CREATE INDEX key_changes_at ON key_changes(at);
      CREATE TRIGGER keys_changed AFTER UPDATE OF
        name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period
      ON keys FOR EACH ROW BEGIN
        DELETE FROM key_changes WHERE at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day');
        INSERT INTO key_changes (key_id) VALUES (NEW.id);
      END;
      CREATE TRIGGER keys_deleted AFTER DELETE ON keys FOR EACH ROW BEGIN
        INSERT INTO key_changes (key_id) VALUES (OLD.id);
      END;
    `,
  },
  {
    version: 4,
    name: 'hard budgets, tpm, concurrency',
    // Existing keys keep today's behaviour: soft budgets. The change trigger is recreated to cover the new
    // columns, so their edits reach every instance's key cache like the others.
    sql: `
      ALTER TABLE keys ADD COLUMN budget_mode TEXT NOT NULL DEFAULT 'soft' CHECK (budget_mode IN ('soft', 'hard'));
      ALTER TABLE keys ADD COLUMN rate_limit_tpm INTEGER;
      ALTER TABLE keys ADD COLUMN max_concurrent INTEGER;
      ALTER TABLE keys ADD COLUMN rate_limit_scope TEXT NOT NULL DEFAULT 'billable' CHECK (rate_limit_scope IN ('billable', 'all'));
      DROP TRIGGER keys_changed;
      CREATE TRIGGER keys_changed AFTER UPDATE OF
        name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period,
        budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope
      ON keys FOR EACH ROW BEGIN
        DELETE FROM key_changes WHERE at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day');
        INSERT INTO key_changes (key_id) VALUES (NEW.id);
      END;
    `,
  },
];

/** Most rows one keyChangesSince answers; a caller further behind asks again from the returned seq. */
const KEY_CHANGES_PAGE = 1_000;

const KEY_COLUMNS =
  'id, name, account_id, hint, created_at, last_used_at, expires_at, revoked_at, ' +
  'allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period, ' +
  'budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope';

type KeyRow = Omit<KeyRecord, 'allowed_providers' | 'allowed_models'> & {
  allowed_providers: string | null;
  allowed_models: string | null;
};

function toKey(r: KeyRow): KeyRecord {
  return {
    ...r,
    allowed_providers: r.allowed_providers === null ? null : (JSON.parse(r.allowed_providers) as Provider[]),
    allowed_models: r.allowed_models === null ? null : (JSON.parse(r.allowed_models) as string[]),
  };
}

const jsonOrNull = (v: readonly string[] | null) => (v === null ? null : JSON.stringify(v));
const ACCOUNT_COLUMNS = 'id, email, password_hash, password_changed_at, created_at';

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Error && 'code' in err && err.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

export class SqliteConfigStore implements ConfigStore {
  private readonly db: Db;
  private readonly stmt: StatementCache;

  constructor(path: string, opts: OpenOptions = {}) {
    this.db = openSqlite(path, opts);
    this.stmt = createStatementCache(this.db);
  }

  async migrate(): Promise<void> {
    runSqliteMigrations(this.db, CONFIG_MIGRATIONS);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  async createAccount(a: { id: string; email: string; password_hash: string }): Promise<Account> {
    const now = new Date().toISOString();
    const email = normalizeStoredEmail(a.email);
    try {
      this.stmt(`INSERT INTO accounts (${ACCOUNT_COLUMNS}) VALUES (?, ?, ?, ?, ?)`).run(
        a.id,
        email,
        a.password_hash,
        now,
        now,
      );
    } catch (err) {
      if (isUniqueViolation(err) && (await this.getAccountByEmail(email))) throw new EmailTakenError();
      throw err;
    }
    return { id: a.id, email, created_at: now };
  }

  async getAccountByEmail(email: string): Promise<AccountWithSecret | null> {
    const row = this.stmt<[string], AccountWithSecret>(
      `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE email = ?`,
    ).get(normalizeStoredEmail(email));
    return row ?? null;
  }

  async hasAccounts(): Promise<boolean> {
    return this.stmt<[], { one: number }>('SELECT 1 AS one FROM accounts LIMIT 1').get() !== undefined;
  }

  async getAccountById(id: string): Promise<AccountWithSecret | null> {
    const row = this.stmt<[string], AccountWithSecret>(
      `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ?`,
    ).get(id);
    return row ?? null;
  }

  async setPassword(accountId: string, passwordHash: string): Promise<void> {
    this.stmt('UPDATE accounts SET password_hash = ?, password_changed_at = ? WHERE id = ?').run(
      passwordHash,
      new Date().toISOString(),
      accountId,
    );
  }

  async createKey(k: {
    id: string;
    account_id: string;
    name: string;
    hash: string;
    hint: string;
    expires_at?: string | null;
  }): Promise<KeyRecord> {
    const rec: KeyRecord = {
      id: k.id,
      name: k.name,
      account_id: k.account_id,
      hint: k.hint,
      created_at: new Date().toISOString(),
      last_used_at: null,
      expires_at: toIsoOrNull(k.expires_at),
      revoked_at: null,
      allowed_providers: null,
      allowed_models: null,
      rate_limit_rpm: null,
      budget_usd: null,
      budget_period: null,
      budget_mode: 'soft',
      rate_limit_tpm: null,
      max_concurrent: null,
      rate_limit_scope: 'billable',
    };
    this.stmt(
      'INSERT INTO keys (id, name, account_id, hint, created_at, expires_at, hash) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ).run(rec.id, rec.name, rec.account_id, rec.hint, rec.created_at, rec.expires_at, k.hash);
    return rec;
  }

  async getKeyByHash(hash: string): Promise<KeyRecord | null> {
    const row = this.stmt<[string], KeyRow>(`SELECT ${KEY_COLUMNS} FROM keys WHERE hash = ?`).get(hash);
    return row ? toKey(row) : null;
  }

  async getKey(id: string): Promise<KeyRecord | null> {
    const row = this.stmt<[string], KeyRow>(`SELECT ${KEY_COLUMNS} FROM keys WHERE id = ?`).get(id);
    return row ? toKey(row) : null;
  }

  async listKeys(accountId: string): Promise<KeyRecord[]> {
    return this.stmt<[string], KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM keys WHERE account_id = ? ORDER BY created_at DESC, id DESC`,
    )
      .all(accountId)
      .map(toKey);
  }

  async renameKey(id: string, name: string): Promise<void> {
    this.stmt('UPDATE keys SET name = ? WHERE id = ?').run(name, id);
  }

  async revokeKey(id: string, at: string): Promise<KeyRecord | null> {
    this.stmt('UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(toIso(at), id);
    return this.getKey(id);
  }

  async setKeyExpiry(id: string, expiresAt: string | null): Promise<void> {
    this.stmt('UPDATE keys SET expires_at = ? WHERE id = ?').run(toIsoOrNull(expiresAt), id);
  }

  async setKeyLimits(id: string, l: KeyLimits): Promise<KeyRecord | null> {
    this.stmt(
      `UPDATE keys SET allowed_providers = ?, allowed_models = ?, rate_limit_rpm = ?, budget_usd = ?,
       budget_period = ?, budget_mode = ?, rate_limit_tpm = ?, max_concurrent = ?, rate_limit_scope = ?
       WHERE id = ?`,
    ).run(
      jsonOrNull(l.allowed_providers),
      jsonOrNull(l.allowed_models),
      l.rate_limit_rpm,
      l.budget_usd,
      l.budget_period,
      l.budget_mode,
      l.rate_limit_tpm,
      l.max_concurrent,
      l.rate_limit_scope,
      id,
    );
    return this.getKey(id);
  }

  async touchKeys(lastUsed: ReadonlyMap<string, string>): Promise<void> {
    if (lastUsed.size === 0) return;
    // Text comparison is time order because every stored time has the same toISOString() shape.
    const stmt = this.stmt<[{ id: string; at: string }]>(
      'UPDATE keys SET last_used_at = @at WHERE id = @id AND (last_used_at IS NULL OR last_used_at < @at)',
    );
    this.db.transaction(() => {
      for (const [id, at] of lastUsed) stmt.run({ id, at: toIso(at) });
    });
  }

  async keyChangeHead(): Promise<number> {
    return this.stmt<[], { seq: number }>('SELECT COALESCE(MAX(seq), 0) AS seq FROM key_changes').get()!.seq;
  }

  async keyChangesSince(seq: number): Promise<KeyChanges> {
    const rows = this.stmt<[number, number], { seq: number; key_id: string }>(
      'SELECT seq, key_id FROM key_changes WHERE seq > ? ORDER BY seq LIMIT ?',
    ).all(seq, KEY_CHANGES_PAGE);
    return { seq: rows.at(-1)?.seq ?? seq, keyIds: [...new Set(rows.map((r) => r.key_id))] };
  }

  async ensureSecret(name: string, candidate: string): Promise<string> {
    this.stmt(
      'INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING',
    ).run(name, candidate, new Date().toISOString());
    const row = this.stmt<[string], { value: string }>('SELECT value FROM secrets WHERE name = ?').get(name);
    return row!.value;
  }

  async takeSecrets(prefix: string): Promise<Array<{ name: string; value: string }>> {
    // substr, not LIKE: a prefix may contain `_` and `%`.
    const rows = this.stmt<[number, string], { name: string; value: string }>(
      'SELECT name, value FROM secrets WHERE substr(name, 1, ?) = ? ORDER BY created_at, name',
    )
      .all(prefix.length, prefix)
      .map((r) => ({ name: r.name, value: r.value }));
    for (const r of rows) this.stmt('DELETE FROM secrets WHERE name = ?').run(r.name);
    return rows;
  }

  async createSession(s: SessionRecord): Promise<void> {
    this.stmt(
      'INSERT INTO sessions (id_hash, account_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?)',
    ).run(s.id_hash, s.account_id, toIso(s.created_at), toIso(s.last_seen_at), toIso(s.expires_at));
  }

  async getSession(idHash: string): Promise<SessionRecord | null> {
    return (
      this.stmt<[string], SessionRecord>(
        'SELECT id_hash, account_id, created_at, last_seen_at, expires_at FROM sessions WHERE id_hash = ?',
      ).get(idHash) ?? null
    );
  }

  async touchSession(idHash: string, at: string): Promise<void> {
    this.stmt('UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?').run(toIso(at), idHash);
  }

  async deleteSession(idHash: string): Promise<void> {
    this.stmt('DELETE FROM sessions WHERE id_hash = ?').run(idHash);
  }

  async deleteSessionsForAccount(accountId: string): Promise<void> {
    this.stmt('DELETE FROM sessions WHERE account_id = ?').run(accountId);
  }
}

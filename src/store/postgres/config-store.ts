/** ConfigStore on PostgreSQL: shared by every instance, so writes are single statements that race safely. */
import type pg from 'pg';
import { EmailTakenError, normalizeStoredEmail } from '../errors.js';
import { toIso, toIsoOrNull } from '../time.js';
import type { Provider } from '../../types.js';
import type {
  Account,
  AccountWithSecret,
  BudgetMode,
  BudgetPeriod,
  ConfigStore,
  KeyChanges,
  KeyLimits,
  KeyRecord,
  RpmScope,
  SessionRecord,
} from '../types.js';
import { isoOrNull, pgErrorCode, resolvePool, runPgMigrations, type PgMigration } from './db.js';

export const CONFIG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: 'accounts, keys, sessions, secrets',
    sql: `
      CREATE TABLE accounts (
        id text PRIMARY KEY,
        email text NOT NULL UNIQUE,
        password_hash text NOT NULL,
        password_changed_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE keys (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        name text NOT NULL,
        hash text NOT NULL,
        hint text NOT NULL,
        created_at timestamptz NOT NULL,
        last_used_at timestamptz,
        expires_at timestamptz,
        revoked_at timestamptz
      );
      CREATE UNIQUE INDEX keys_hash ON keys(hash);
      CREATE INDEX keys_account ON keys(account_id);
      CREATE TABLE sessions (
        id_hash text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL,
        last_seen_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX sessions_account ON sessions(account_id);
      CREATE TABLE secrets (
        name text PRIMARY KEY,
        value text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 2,
    name: 'key limits',
    // NULL everywhere means "no limit". double precision, not numeric: pg returns numeric as a string.
    sql: `
      ALTER TABLE keys
        ADD COLUMN allowed_providers text[],
        ADD COLUMN allowed_models text[],
        ADD COLUMN rate_limit_rpm integer,
        ADD COLUMN budget_usd double precision,
        ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'month'));
    `,
  },
  {
    version: 3,
    name: 'key change feed',
    // Every instance polls this feed (src/keys/change-feed.ts) to drop changed keys from its cache without
    // Redis. Triggers, not store methods, append to it, so no writer can change a key and skip the feed
    // (an operator's SQL included); last_used_at is not in the column list, so touchKeys stays silent.
    // A sequence hands out numbers in call order but transactions commit in any order: a poller could see
    // seq 6 before seq 5 commits and skip 5 for good. The table lock (readers are not blocked) serializes
    // the rare key changes, so every seq is committed before a higher one is handed out.
    sql: `
      CREATE TABLE key_changes (
        seq bigserial PRIMARY KEY,
        key_id text NOT NULL,
        at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX key_changes_at ON key_changes(at);
      CREATE FUNCTION keyrelay_record_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        LOCK TABLE key_changes IN EXCLUSIVE MODE;
        DELETE FROM key_changes WHERE at < now() - interval '1 day';
        INSERT INTO key_changes (key_id) VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER keys_changed AFTER UPDATE OF
        name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period
        OR DELETE
      ON keys FOR EACH ROW EXECUTE FUNCTION keyrelay_record_key_change();
    `,
  },
  {
    version: 4,
    name: 'hard budgets, tpm, concurrency',
    // Existing keys keep today's behaviour: soft budgets. The change trigger is recreated to cover the new
    // columns, so their edits reach every instance's key cache like the others.
    sql: `
      ALTER TABLE keys
        ADD COLUMN budget_mode text NOT NULL DEFAULT 'soft' CHECK (budget_mode IN ('soft', 'hard')),
        ADD COLUMN rate_limit_tpm integer,
        ADD COLUMN max_concurrent integer,
        ADD COLUMN rate_limit_scope text NOT NULL DEFAULT 'billable' CHECK (rate_limit_scope IN ('billable', 'all'));
      DROP TRIGGER keys_changed ON keys;
      CREATE TRIGGER keys_changed AFTER UPDATE OF
        name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period,
        budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope
        OR DELETE
      ON keys FOR EACH ROW EXECUTE FUNCTION keyrelay_record_key_change();
    `,
  },
];

/** Most rows one keyChangesSince answers; a caller further behind asks again from the returned seq. */
const KEY_CHANGES_PAGE = 1_000;

const KEY_COLUMNS =
  'id, name, account_id, hint, created_at, last_used_at, expires_at, revoked_at, ' +
  'allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period, ' +
  'budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope';
const ACCOUNT_COLUMNS = 'id, email, password_hash, password_changed_at, created_at';
const SESSION_COLUMNS = 'id_hash, account_id, created_at, last_seen_at, expires_at';

type Row = Record<string, unknown>;

function toAccount(r: Row): AccountWithSecret {
  return {
    id: r.id as string,
    email: r.email as string,
    password_hash: r.password_hash as string,
    password_changed_at: isoOrNull(r.password_changed_at)!,
    created_at: isoOrNull(r.created_at)!,
  };
}

function toKey(r: Row): KeyRecord {
  return {
    id: r.id as string,
    name: r.name as string,
    account_id: r.account_id as string,
    hint: r.hint as string,
    created_at: isoOrNull(r.created_at)!,
    last_used_at: isoOrNull(r.last_used_at),
    expires_at: isoOrNull(r.expires_at),
    revoked_at: isoOrNull(r.revoked_at),
    allowed_providers: (r.allowed_providers as Provider[] | null) ?? null,
    allowed_models: (r.allowed_models as string[] | null) ?? null,
    rate_limit_rpm: (r.rate_limit_rpm as number | null) ?? null,
    budget_usd: (r.budget_usd as number | null) ?? null,
    budget_period: (r.budget_period as BudgetPeriod | null) ?? null,
    budget_mode: (r.budget_mode as BudgetMode | undefined) ?? 'soft',
    rate_limit_tpm: (r.rate_limit_tpm as number | null) ?? null,
    max_concurrent: (r.max_concurrent as number | null) ?? null,
    rate_limit_scope: (r.rate_limit_scope as RpmScope | undefined) ?? 'billable',
  };
}

function toSession(r: Row): SessionRecord {
  return {
    id_hash: r.id_hash as string,
    account_id: r.account_id as string,
    created_at: isoOrNull(r.created_at)!,
    last_seen_at: isoOrNull(r.last_seen_at)!,
    expires_at: isoOrNull(r.expires_at)!,
  };
}

export class PgConfigStore implements ConfigStore {
  private readonly pool: pg.Pool;
  private readonly ownsPool: boolean;

  /** A URL gives the store its own pool (ended by close()); a pool passed in stays the caller's. */
  constructor(poolOrUrl: pg.Pool | string) {
    const { pool, owned } = resolvePool(poolOrUrl);
    this.pool = pool;
    this.ownsPool = owned;
  }

  private async rows(sql: string, params: unknown[]): Promise<Row[]> {
    return (await this.pool.query<Row>(sql, params)).rows;
  }

  async migrate(): Promise<void> {
    await runPgMigrations(this.pool, 'config', CONFIG_MIGRATIONS);
  }

  async close(): Promise<void> {
    if (this.ownsPool && !this.pool.ended) await this.pool.end();
  }

  async createAccount(a: { id: string; email: string; password_hash: string }): Promise<Account> {
    const now = new Date().toISOString();
    const email = normalizeStoredEmail(a.email);
    try {
      await this.pool.query(`INSERT INTO accounts (${ACCOUNT_COLUMNS}) VALUES ($1, $2, $3, $4, $4)`, [
        a.id,
        email,
        a.password_hash,
        now,
      ]);
    } catch (err) {
      if (pgErrorCode(err) === '23505' && (await this.getAccountByEmail(email))) throw new EmailTakenError();
      throw err;
    }
    return { id: a.id, email, created_at: now };
  }

  async getAccountByEmail(email: string): Promise<AccountWithSecret | null> {
    const [r] = await this.rows(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE email = $1`, [
      normalizeStoredEmail(email),
    ]);
    return r ? toAccount(r) : null;
  }

  async hasAccounts(): Promise<boolean> {
    return (await this.rows('SELECT 1 AS one FROM accounts LIMIT 1', [])).length > 0;
  }

  async getAccountById(id: string): Promise<AccountWithSecret | null> {
    const [r] = await this.rows(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`, [id]);
    return r ? toAccount(r) : null;
  }

  async setPassword(accountId: string, passwordHash: string): Promise<void> {
    await this.pool.query('UPDATE accounts SET password_hash = $1, password_changed_at = $2 WHERE id = $3', [
      passwordHash,
      new Date().toISOString(),
      accountId,
    ]);
  }

  async createKey(k: {
    id: string;
    account_id: string;
    name: string;
    hash: string;
    hint: string;
    expires_at?: string | null;
  }): Promise<KeyRecord> {
    const [r] = await this.rows(
      `INSERT INTO keys (id, account_id, name, hash, hint, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${KEY_COLUMNS}`,
      [k.id, k.account_id, k.name, k.hash, k.hint, new Date().toISOString(), toIsoOrNull(k.expires_at)],
    );
    return toKey(r!);
  }

  async getKeyByHash(hash: string): Promise<KeyRecord | null> {
    const [r] = await this.rows(`SELECT ${KEY_COLUMNS} FROM keys WHERE hash = $1`, [hash]);
    return r ? toKey(r) : null;
  }

  async getKey(id: string): Promise<KeyRecord | null> {
    const [r] = await this.rows(`SELECT ${KEY_COLUMNS} FROM keys WHERE id = $1`, [id]);
    return r ? toKey(r) : null;
  }

  async listKeys(accountId: string): Promise<KeyRecord[]> {
    const rows = await this.rows(
      `SELECT ${KEY_COLUMNS} FROM keys WHERE account_id = $1 ORDER BY created_at DESC, id COLLATE "C" DESC`,
      [accountId],
    );
    return rows.map(toKey);
  }

  async renameKey(id: string, name: string): Promise<void> {
    await this.pool.query('UPDATE keys SET name = $1 WHERE id = $2', [name, id]);
  }

  async revokeKey(id: string, at: string): Promise<KeyRecord | null> {
    await this.pool.query('UPDATE keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [
      toIso(at),
      id,
    ]);
    return this.getKey(id);
  }

  async setKeyExpiry(id: string, expiresAt: string | null): Promise<void> {
    await this.pool.query('UPDATE keys SET expires_at = $1 WHERE id = $2', [toIsoOrNull(expiresAt), id]);
  }

  async setKeyLimits(id: string, l: KeyLimits): Promise<KeyRecord | null> {
    const [r] = await this.rows(
      `UPDATE keys SET allowed_providers = $1, allowed_models = $2, rate_limit_rpm = $3, budget_usd = $4,
       budget_period = $5, budget_mode = $6, rate_limit_tpm = $7, max_concurrent = $8, rate_limit_scope = $9
       WHERE id = $10 RETURNING ${KEY_COLUMNS}`,
      [
        l.allowed_providers,
        l.allowed_models,
        l.rate_limit_rpm,
        l.budget_usd,
        l.budget_period,
        l.budget_mode,
        l.rate_limit_tpm,
        l.max_concurrent,
        l.rate_limit_scope,
        id,
      ],
    );
    return r ? toKey(r) : null;
  }

  async touchKeys(lastUsed: ReadonlyMap<string, string>): Promise<void> {
    if (lastUsed.size === 0) return;
    const entries = [...lastUsed];
    // One statement for the whole batch; the WHERE keeps the max even when instances flush out of order.
    await this.pool.query(
      `UPDATE keys SET last_used_at = v.at
       FROM unnest($1::text[], $2::timestamptz[]) AS v(id, at)
       WHERE keys.id = v.id AND (keys.last_used_at IS NULL OR keys.last_used_at < v.at)`,
      [entries.map(([id]) => id), entries.map(([, at]) => toIso(at))],
    );
  }

  async keyChangeHead(): Promise<number> {
    const [r] = await this.rows('SELECT COALESCE(MAX(seq), 0) AS seq FROM key_changes', []);
    return Number(r!.seq);
  }

  async keyChangesSince(seq: number): Promise<KeyChanges> {
    // bigint comes back as a string; seqs stay far below 2^53.
    const rows = await this.rows('SELECT seq, key_id FROM key_changes WHERE seq > $1 ORDER BY seq LIMIT $2', [
      seq,
      KEY_CHANGES_PAGE,
    ]);
    const last = rows.at(-1);
    return { seq: last ? Number(last.seq) : seq, keyIds: [...new Set(rows.map((r) => r.key_id as string))] };
  }

  async ensureSecret(name: string, candidate: string): Promise<string> {
    // A concurrent insert of the same name waits for the first to commit, then does nothing.
    await this.pool.query('INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
      name,
      candidate,
    ]);
    const [r] = await this.rows('SELECT value FROM secrets WHERE name = $1', [name]);
    return r!.value as string;
  }

  async takeSecrets(prefix: string): Promise<Array<{ name: string; value: string }>> {
    const rows = await this.rows(
      'DELETE FROM secrets WHERE left(name, $1) = $2 RETURNING name, value, created_at',
      [prefix.length, prefix],
    );
    return rows
      .sort(
        (a, b) =>
          new Date(a.created_at as string).getTime() - new Date(b.created_at as string).getTime() ||
          String(a.name).localeCompare(String(b.name)),
      )
      .map((r) => ({ name: r.name as string, value: r.value as string }));
  }

  async createSession(s: SessionRecord): Promise<void> {
    await this.pool.query(`INSERT INTO sessions (${SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5)`, [
      s.id_hash,
      s.account_id,
      toIso(s.created_at),
      toIso(s.last_seen_at),
      toIso(s.expires_at),
    ]);
  }

  async getSession(idHash: string): Promise<SessionRecord | null> {
    const [r] = await this.rows(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id_hash = $1`, [idHash]);
    return r ? toSession(r) : null;
  }

  async touchSession(idHash: string, at: string): Promise<void> {
    await this.pool.query('UPDATE sessions SET last_seen_at = $1 WHERE id_hash = $2', [toIso(at), idHash]);
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.pool.query('DELETE FROM sessions WHERE id_hash = $1', [idHash]);
  }

  async deleteSessionsForAccount(accountId: string): Promise<void> {
    await this.pool.query('DELETE FROM sessions WHERE account_id = $1', [accountId]);
  }
}

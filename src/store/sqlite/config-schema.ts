/** The config store's numbered migrations (SQLite); each keeps existing data. */
import type { Db, Migration } from './db.js';
import { KEYS_TRIGGER_COLUMNS } from '../key-trigger-columns.js';

function rebuildKeysTrigger(db: Db): void {
  const have = new Set(
    db
      .prepare<[], { name: string }>('PRAGMA table_info(keys)')
      .all()
      .map((c) => c.name),
  );
  if (!KEYS_TRIGGER_COLUMNS.every((c) => have.has(c))) return;
  db.exec(`
    DROP TRIGGER keys_changed;
    CREATE TRIGGER keys_changed AFTER UPDATE OF ${KEYS_TRIGGER_COLUMNS.join(', ')}
    ON keys FOR EACH ROW BEGIN
      DELETE FROM key_changes WHERE at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day');
      INSERT INTO key_changes (key_id) VALUES (NEW.id);
    END;
  `);
}

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
  {
    version: 5,
    name: 'organizations, memberships, invites',
    // Every existing account gets its personal organization under its own id and owns it; its keys move into
    // it (org_id = account_id), so nothing an account could see or use changes. The key change trigger now
    // covers who holds a key and where it lives too, so a transfer reaches every instance's key cache.
    sql: `
      CREATE TABLE orgs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        personal_of TEXT UNIQUE REFERENCES accounts(id) ON DELETE CASCADE,
        created_at TEXT NOT NULL
      );
      CREATE TABLE memberships (
        org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
        created_at TEXT NOT NULL,
        PRIMARY KEY (org_id, account_id)
      );
      CREATE INDEX memberships_account ON memberships(account_id);
      CREATE TABLE invites (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        token_hash TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT,
        used_by TEXT
      );
      CREATE INDEX invites_org ON invites(org_id);
      INSERT INTO orgs (id, name, personal_of, created_at) SELECT id, email, id, created_at FROM accounts;
      INSERT INTO memberships (org_id, account_id, role, created_at) SELECT id, id, 'owner', created_at FROM accounts;
      ALTER TABLE keys ADD COLUMN org_id TEXT REFERENCES orgs(id);
      UPDATE keys SET org_id = account_id;
      CREATE INDEX keys_org ON keys(org_id, account_id);
      DROP TRIGGER keys_changed;
      CREATE TRIGGER keys_changed AFTER UPDATE OF
        name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period,
        budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope, account_id, org_id
      ON keys FOR EACH ROW BEGIN
        DELETE FROM key_changes WHERE at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day');
        INSERT INTO key_changes (key_id) VALUES (NEW.id);
      END;
    `,
  },
  {
    version: 6,
    name: 'audit log',
    // Append-only: the triggers refuse any change to a written entry, an operator's SQL included.
    sql: `
      CREATE TABLE audit_log (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL,
        at TEXT NOT NULL,
        actor_id TEXT,
        actor_email TEXT,
        action TEXT NOT NULL,
        target TEXT,
        ip TEXT,
        user_agent TEXT,
        before TEXT CHECK (before IS NULL OR json_valid(before)),
        after TEXT CHECK (after IS NULL OR json_valid(after))
      );
      CREATE INDEX audit_log_org ON audit_log(org_id, id);
      CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log BEGIN
        SELECT RAISE(ABORT, 'audit_log is append-only');
      END;
      CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log BEGIN
        SELECT RAISE(ABORT, 'audit_log is append-only');
      END;
    `,
  },
  {
    version: 7,
    name: 'settings',
    sql: `
      CREATE TABLE settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
    `,
  },
  {
    version: 8,
    name: 'single sign-on',
    // One OpenID Connect connection per organization; each email domain belongs to at most one of them (the
    // primary key), so a domain never has two identity providers to choose from. Flows live until their
    // callback takes them or they expire (a sign-in started and abandoned), swept at the next start.
    sql: `
      CREATE TABLE sso_connections (
        org_id TEXT PRIMARY KEY REFERENCES orgs(id) ON DELETE CASCADE,
        issuer TEXT NOT NULL,
        client_id TEXT NOT NULL,
        client_secret TEXT NOT NULL,
        default_role TEXT NOT NULL CHECK (default_role IN ('admin', 'member', 'viewer')),
        sso_only INTEGER NOT NULL DEFAULT 0 CHECK (sso_only IN (0, 1)),
        updated_at TEXT NOT NULL
      ) STRICT;
      CREATE TABLE sso_domains (
        domain TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES sso_connections(org_id) ON DELETE CASCADE
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX sso_domains_org ON sso_domains(org_id);
      CREATE TABLE sso_flows (
        id_hash TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        state TEXT NOT NULL,
        nonce TEXT NOT NULL,
        code_verifier TEXT NOT NULL,
        expires_at TEXT NOT NULL
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX sso_flows_expiry ON sso_flows(expires_at);
    `,
  },
  {
    version: 13,
    name: 'hard budgets: unpriced calls per key',
    // Was one setting for the whole instance, whose default was to refuse: existing keys keep refusing.
    apply: (db) => {
      db.exec(
        `ALTER TABLE keys ADD COLUMN budget_unpriced TEXT NOT NULL DEFAULT 'refuse' CHECK (budget_unpriced IN ('refuse', 'allow'));`,
      );
      rebuildKeysTrigger(db);
    },
  },
  {
    version: 14,
    name: 'accounts: body retention',
    // NULL: bodies are kept as long as their rows (KEYRELAY_RETENTION_DAYS), as before.
    sql: `
      ALTER TABLE accounts ADD COLUMN body_retention_days INTEGER CHECK (body_retention_days > 0);
    `,
  },
  {
    version: 9,
    name: 'credential labels',
    // The name an account gives a provider credential it sends (by its keyed fingerprint, never the
    // credential): "prod OpenAI key". Per account, as keys are.
    sql: `
      CREATE TABLE credential_labels (
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        fingerprint TEXT NOT NULL,
        label TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (account_id, fingerprint)
      ) STRICT, WITHOUT ROWID;
    `,
  },
  {
    version: 10,
    name: 'api tokens',
    // Read-only tokens for scripts: stored as SHA-256 with a hint, like keys; scopes as a JSON array.
    sql: `
      CREATE TABLE api_tokens (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        scopes TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      ) STRICT;
      CREATE INDEX api_tokens_account ON api_tokens(account_id, created_at);
    `,
  },
  {
    version: 11,
    name: 'audit retention per organization',
    // NULL: entries are kept until an operator drops them, as before. The log stays append-only for every
    // entry its organization still keeps: the delete trigger lets through only entries past the retention,
    // which the retention job prunes (src/log/retention.ts).
    sql: `
      ALTER TABLE orgs ADD COLUMN audit_retention_days INTEGER CHECK (audit_retention_days > 0);
      DROP TRIGGER audit_log_no_delete;
      CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
      WHEN NOT EXISTS (
        SELECT 1 FROM orgs o WHERE o.id = OLD.org_id AND o.audit_retention_days IS NOT NULL
          AND OLD.at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || o.audit_retention_days || ' days')
      )
      BEGIN
        SELECT RAISE(ABORT, 'audit_log is append-only');
      END;
    `,
  },
  {
    version: 17,
    name: 'service keys',
    // A service key is the organization's, held by no member: account_id keeps who created it (request rows
    // need an account), and removing that member leaves the key alone. Existing keys are members' keys.
    apply: (db) => {
      db.exec(`ALTER TABLE keys ADD COLUMN service INTEGER NOT NULL DEFAULT 0 CHECK (service IN (0, 1));`);
      rebuildKeysTrigger(db);
    },
  },
  {
    version: 12,
    name: 'keys: caps per end user',
    // Existing keys get none. The change trigger covers the new columns, so a changed cap reaches every
    // instance's key cache like any other limit.
    apply: (db) => {
      db.exec(`
        ALTER TABLE keys ADD COLUMN user_rate_limit_rpm INTEGER;
        ALTER TABLE keys ADD COLUMN user_budget_usd REAL;
        ALTER TABLE keys ADD COLUMN user_budget_period TEXT CHECK (user_budget_period IN ('day', 'month'));
        ALTER TABLE keys ADD COLUMN user_budget_mode TEXT NOT NULL DEFAULT 'soft' CHECK (user_budget_mode IN ('soft', 'hard'));
      `);
      rebuildKeysTrigger(db);
    },
  },
  {
    version: 15,
    name: 'alert rules',
    // An organization's alert rules; params as JSON (their shape is the kind's: src/alerts/rules.ts).
    sql: `
      CREATE TABLE alert_rules (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('org', 'member', 'key')),
        scope_id TEXT,
        kind TEXT NOT NULL,
        params TEXT NOT NULL,
        url TEXT NOT NULL,
        format TEXT NOT NULL CHECK (format IN ('json', 'slack')),
        secret TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        created_by TEXT NOT NULL
      ) STRICT;
      CREATE INDEX alert_rules_org ON alert_rules(org_id, created_at);
    `,
  },
  {
    version: 16,
    name: 'alert deliveries',
    // One row per rule and occasion: the unique (rule_id, dedupe_key) is the claim every instance races for.
    sql: `
      CREATE TABLE alert_deliveries (
        id TEXT PRIMARY KEY,
        rule_id TEXT NOT NULL REFERENCES alert_rules(id) ON DELETE CASCADE,
        org_id TEXT NOT NULL,
        dedupe_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        response_status INTEGER,
        error TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (rule_id, dedupe_key)
      ) STRICT;
      CREATE INDEX alert_deliveries_org ON alert_deliveries(org_id, id);
    `,
  },
  {
    version: 18,
    name: 'limits per member',
    // Limits on the sum of a member's keys in an organization; existing members get none. A change (or the
    // removal of a member who had some) enters the member's keys in the change feed, so every instance's key
    // cache reads the member's new limits with its keys.
    sql: `
      ALTER TABLE memberships ADD COLUMN rate_limit_rpm INTEGER;
      ALTER TABLE memberships ADD COLUMN budget_usd REAL;
      ALTER TABLE memberships ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
      ALTER TABLE memberships ADD COLUMN budget_mode TEXT NOT NULL DEFAULT 'soft' CHECK (budget_mode IN ('soft', 'hard'));
      CREATE TRIGGER memberships_limits_changed AFTER UPDATE OF rate_limit_rpm, budget_usd, budget_period, budget_mode
      ON memberships FOR EACH ROW BEGIN
        DELETE FROM key_changes WHERE at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day');
        INSERT INTO key_changes (key_id)
          SELECT id FROM keys WHERE org_id = NEW.org_id AND account_id = NEW.account_id AND service = 0;
      END;
      CREATE TRIGGER memberships_limits_deleted AFTER DELETE ON memberships FOR EACH ROW
      WHEN OLD.rate_limit_rpm IS NOT NULL OR OLD.budget_usd IS NOT NULL BEGIN
        INSERT INTO key_changes (key_id)
          SELECT id FROM keys WHERE org_id = OLD.org_id AND account_id = OLD.account_id AND service = 0;
      END;
    `,
  },
  {
    version: 19,
    name: 'provider key links',
    // The install owner's tie of a provider's API key id (its usage report's api_key_id) to a credential
    // keyrelay saw, by the credential's keyed fingerprint: never the credential nor any part of it.
    sql: `
      CREATE TABLE provider_key_links (
        provider TEXT NOT NULL,
        api_key_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (provider, api_key_id)
      ) STRICT, WITHOUT ROWID;
    `,
  },
  {
    version: 20,
    name: 'alert delivery leases, session sign-in method',
    // The instance sending a delivery holds it until lease_until (its next attempt's time and then some);
    // a pending delivery past it lost its sender and another instance takes it over. Deliveries pending
    // from before this are past theirs at once. A session records how it was signed in, so that a password
    // session ends when its account's organization turns SSO-only; one from before is taken as a password's.
    sql: `
      ALTER TABLE sessions ADD COLUMN via TEXT CHECK (via IN ('password', 'sso'));
      ALTER TABLE alert_deliveries ADD COLUMN lease_until TEXT;
      UPDATE alert_deliveries SET lease_until = updated_at WHERE state = 'pending';
      CREATE INDEX alert_deliveries_lease ON alert_deliveries(lease_until) WHERE state = 'pending';
    `,
  },
];

/** The config store's numbered migrations (PostgreSQL); each keeps existing data. */
import { KEYS_TRIGGER_COLUMNS } from '../key-trigger-columns.js';
import type { PgMigration } from './db.js';

const REBUILD_KEYS_TRIGGER = `
  DO $$ BEGIN
    IF (SELECT count(*) FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'keys'
          AND column_name IN (${KEYS_TRIGGER_COLUMNS.map((c) => `'${c}'`).join(', ')})) = ${KEYS_TRIGGER_COLUMNS.length}
    THEN
      DROP TRIGGER keys_changed ON keys;
      CREATE TRIGGER keys_changed AFTER UPDATE OF ${KEYS_TRIGGER_COLUMNS.join(', ')} OR DELETE
      ON keys FOR EACH ROW EXECUTE FUNCTION keyrelay_record_key_change();
    END IF;
  END $$;
`;

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
  {
    version: 5,
    name: 'organizations, memberships, invites',
    // Every existing account gets its personal organization under its own id and owns it; its keys move into
    // it (org_id = account_id), so nothing an account could see or use changes. The key change trigger now
    // covers who holds a key and where it lives too, so a transfer reaches every instance's key cache.
    sql: `
      CREATE TABLE orgs (
        id text PRIMARY KEY,
        name text NOT NULL,
        personal_of text UNIQUE REFERENCES accounts(id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE memberships (
        org_id text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
        created_at timestamptz NOT NULL,
        PRIMARY KEY (org_id, account_id)
      );
      CREATE INDEX memberships_account ON memberships(account_id);
      CREATE TABLE invites (
        id text PRIMARY KEY,
        org_id text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        token_hash text NOT NULL UNIQUE,
        role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
        created_by text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at timestamptz,
        used_by text
      );
      CREATE INDEX invites_org ON invites(org_id);
      INSERT INTO orgs (id, name, personal_of, created_at) SELECT id, email, id, created_at FROM accounts;
      INSERT INTO memberships (org_id, account_id, role, created_at) SELECT id, id, 'owner', created_at FROM accounts;
      ALTER TABLE keys ADD COLUMN org_id text REFERENCES orgs(id);
      UPDATE keys SET org_id = account_id;
      ALTER TABLE keys ALTER COLUMN org_id SET NOT NULL;
      CREATE INDEX keys_org ON keys(org_id, account_id);
      DROP TRIGGER keys_changed ON keys;
      CREATE TRIGGER keys_changed AFTER UPDATE OF
        name, expires_at, revoked_at, allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period,
        budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope, account_id, org_id
        OR DELETE
      ON keys FOR EACH ROW EXECUTE FUNCTION keyrelay_record_key_change();
    `,
  },
  {
    version: 6,
    name: 'audit log',
    // Append-only: the trigger refuses any change to a written entry, an operator's SQL included.
    sql: `
      CREATE TABLE audit_log (
        id text PRIMARY KEY,
        org_id text NOT NULL,
        at timestamptz NOT NULL,
        actor_id text,
        actor_email text,
        action text NOT NULL,
        target text,
        ip text,
        user_agent text,
        before jsonb,
        after jsonb
      );
      CREATE INDEX audit_log_org ON audit_log(org_id, id);
      CREATE FUNCTION keyrelay_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'audit_log is append-only';
      END
      $$;
      CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
        FOR EACH ROW EXECUTE FUNCTION keyrelay_audit_append_only();
    `,
  },
  {
    version: 7,
    name: 'settings',
    sql: `
      CREATE TABLE settings (
        name text PRIMARY KEY,
        value text NOT NULL,
        updated_at timestamptz NOT NULL
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
        org_id text PRIMARY KEY REFERENCES orgs(id) ON DELETE CASCADE,
        issuer text NOT NULL,
        client_id text NOT NULL,
        client_secret text NOT NULL,
        default_role text NOT NULL CHECK (default_role IN ('admin', 'member', 'viewer')),
        sso_only boolean NOT NULL DEFAULT false,
        updated_at timestamptz NOT NULL
      );
      CREATE TABLE sso_domains (
        domain text PRIMARY KEY,
        org_id text NOT NULL REFERENCES sso_connections(org_id) ON DELETE CASCADE
      );
      CREATE INDEX sso_domains_org ON sso_domains(org_id);
      CREATE TABLE sso_flows (
        id_hash text PRIMARY KEY,
        org_id text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        state text NOT NULL,
        nonce text NOT NULL,
        code_verifier text NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX sso_flows_expiry ON sso_flows(expires_at);
    `,
  },
  {
    version: 13,
    name: 'hard budgets: unpriced calls per key',
    // Was one setting for the whole instance, whose default was to refuse: existing keys keep refusing.
    sql: `
      ALTER TABLE keys
        ADD COLUMN budget_unpriced text NOT NULL DEFAULT 'refuse' CHECK (budget_unpriced IN ('refuse', 'allow'));
      ${REBUILD_KEYS_TRIGGER}
    `,
  },
  {
    version: 14,
    name: 'accounts: body retention',
    // NULL: bodies are kept as long as their rows (KEYRELAY_RETENTION_DAYS), as before.
    sql: `
      ALTER TABLE accounts ADD COLUMN body_retention_days integer CHECK (body_retention_days > 0);
    `,
  },
  {
    version: 9,
    name: 'credential labels',
    // The name an account gives a provider credential it sends (by its keyed fingerprint, never the
    // credential): "prod OpenAI key". Per account, as keys are.
    sql: `
      CREATE TABLE credential_labels (
        account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        fingerprint text NOT NULL,
        label text NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (account_id, fingerprint)
      );
    `,
  },
  {
    version: 10,
    name: 'api tokens',
    // Read-only tokens for scripts: stored as SHA-256 with a hint, like keys.
    sql: `
      CREATE TABLE api_tokens (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        name text NOT NULL,
        hash text NOT NULL UNIQUE,
        hint text NOT NULL,
        scopes text[] NOT NULL,
        created_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
      CREATE INDEX api_tokens_account ON api_tokens (account_id, created_at);
    `,
  },
  {
    version: 11,
    name: 'audit retention per organization',
    // NULL: entries are kept until an operator drops them, as before. The log stays append-only for every
    // entry its organization still keeps: the trigger lets a delete through only for an entry past the
    // retention, which the retention job prunes (src/log/retention.ts).
    sql: `
      ALTER TABLE orgs ADD COLUMN audit_retention_days integer CHECK (audit_retention_days > 0);
      CREATE OR REPLACE FUNCTION keyrelay_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' AND EXISTS (
          SELECT 1 FROM orgs o WHERE o.id = OLD.org_id AND o.audit_retention_days IS NOT NULL
            AND OLD.at < now() - o.audit_retention_days * interval '1 day'
        ) THEN
          RETURN OLD;
        END IF;
        RAISE EXCEPTION 'audit_log is append-only';
      END
      $$;
    `,
  },
  {
    version: 17,
    name: 'service keys',
    // A service key is the organization's, held by no member: account_id keeps who created it (request rows
    // need an account), and removing that member leaves the key alone. Existing keys are members' keys.
    sql: `
      ALTER TABLE keys ADD COLUMN service boolean NOT NULL DEFAULT false;
      ${REBUILD_KEYS_TRIGGER}
    `,
  },
  {
    version: 12,
    name: 'keys: caps per end user',
    // Existing keys get none. The change trigger covers the new columns, so a changed cap reaches every
    // instance's key cache like any other limit.
    sql: `
      ALTER TABLE keys
        ADD COLUMN user_rate_limit_rpm integer,
        ADD COLUMN user_budget_usd double precision,
        ADD COLUMN user_budget_period text CHECK (user_budget_period IN ('day', 'month')),
        ADD COLUMN user_budget_mode text NOT NULL DEFAULT 'soft' CHECK (user_budget_mode IN ('soft', 'hard'));
      ${REBUILD_KEYS_TRIGGER}
    `,
  },
  {
    version: 15,
    name: 'alert rules',
    // An organization's alert rules; params as JSON (their shape is the kind's: src/alerts/rules.ts).
    sql: `
      CREATE TABLE alert_rules (
        id text PRIMARY KEY,
        org_id text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
        name text NOT NULL,
        scope text NOT NULL CHECK (scope IN ('org', 'member', 'key')),
        scope_id text,
        kind text NOT NULL,
        params jsonb NOT NULL,
        url text NOT NULL,
        format text NOT NULL CHECK (format IN ('json', 'slack')),
        secret text NOT NULL,
        enabled boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL,
        created_by text NOT NULL
      );
      CREATE INDEX alert_rules_org ON alert_rules(org_id, created_at);
    `,
  },
  {
    version: 16,
    name: 'alert deliveries',
    // One row per rule and occasion: the unique (rule_id, dedupe_key) is the claim every instance races for.
    sql: `
      CREATE TABLE alert_deliveries (
        id text PRIMARY KEY,
        rule_id text NOT NULL REFERENCES alert_rules(id) ON DELETE CASCADE,
        org_id text NOT NULL,
        dedupe_key text NOT NULL,
        payload text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        response_status integer,
        error text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        UNIQUE (rule_id, dedupe_key)
      );
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
      ALTER TABLE memberships
        ADD COLUMN rate_limit_rpm integer,
        ADD COLUMN budget_usd double precision,
        ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'month')),
        ADD COLUMN budget_mode text NOT NULL DEFAULT 'soft' CHECK (budget_mode IN ('soft', 'hard'));
      CREATE FUNCTION keyrelay_record_member_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' AND OLD.rate_limit_rpm IS NULL AND OLD.budget_usd IS NULL THEN
          RETURN NULL;
        END IF;
        LOCK TABLE key_changes IN EXCLUSIVE MODE;
        DELETE FROM key_changes WHERE at < now() - interval '1 day';
        INSERT INTO key_changes (key_id)
          SELECT id FROM keys WHERE org_id = OLD.org_id AND account_id = OLD.account_id AND NOT service;
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER memberships_limits_changed
        AFTER UPDATE OF rate_limit_rpm, budget_usd, budget_period, budget_mode OR DELETE
      ON memberships FOR EACH ROW EXECUTE FUNCTION keyrelay_record_member_change();
    `,
  },
  {
    version: 19,
    name: 'provider key links',
    // The install owner's tie of a provider's API key id (its usage report's api_key_id) to a credential
    // keyrelay saw, by the credential's keyed fingerprint: never the credential nor any part of it.
    sql: `
      CREATE TABLE provider_key_links (
        provider text NOT NULL,
        api_key_id text NOT NULL,
        fingerprint text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (provider, api_key_id)
      );
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
      ALTER TABLE sessions ADD COLUMN via text CHECK (via IN ('password', 'sso'));
      ALTER TABLE alert_deliveries ADD COLUMN lease_until timestamptz;
      UPDATE alert_deliveries SET lease_until = updated_at WHERE state = 'pending';
      CREATE INDEX alert_deliveries_lease ON alert_deliveries(lease_until) WHERE state = 'pending';
    `,
  },
];

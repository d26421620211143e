/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/**
 * ConfigStore on SQLite (driver.ts): synchronous inside, promises outside to fit the interface.
 * Small and read-mostly; the request log lives in a separate file (SqliteLogStore).
 */
import { domainError } from '../../errors.js';
import { normalizeStoredEmail } from '../errors.js';
import { toIso, toIsoOrNull } from '../time.js';
import type { Provider } from '../../types.js';
import type {
  ApiTokenRecord,
  ApiTokenScope,
  Account,
  AccountSettings,
  AccountWithSecret,
  AuditEntry,
  AuditFilter,
  ConfigStore,
  CredentialLabel,
  ProviderKeyLink,
  KeyChanges,
  KeyLimits,
  InviteRecord,
  KeyRecord,
  Membership,
  MemberLimits,
  Org,
  OrgRole,
  SessionRecord,
  SsoConnection,
  SsoFlow,
} from '../types.js';
import { createStatementCache, openSqlite, runSqliteMigrations, type Db, type StatementCache } from './db.js';
import type { OpenOptions } from './driver.js';
import { CONFIG_MIGRATIONS } from './config-schema.js';
import { sqliteAlertStore } from './alerts.js';
import type { AlertStore } from '../alert-types.js';

// Tests upgrade databases from older schemas with them.
export { CONFIG_MIGRATIONS };

const TOKEN_COLUMNS = 'id, account_id, name, hint, scopes, created_at, revoked_at';
type TokenRow = Omit<ApiTokenRecord, 'scopes'> & { scopes: string };
const toToken = (r: TokenRow): ApiTokenRecord => ({ ...r, scopes: JSON.parse(r.scopes) as ApiTokenScope[] });

/** Most rows one keyChangesSince answers; a caller further behind asks again from the returned seq. */
const KEY_CHANGES_PAGE = 1_000;

const KEY_COLUMNS =
  'id, name, account_id, org_id, hint, created_at, last_used_at, expires_at, revoked_at, ' +
  'allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period, ' +
  'budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope, budget_unpriced, service, ' +
  'user_rate_limit_rpm, user_budget_usd, user_budget_period, user_budget_mode';

type KeyRow = Omit<KeyRecord, 'allowed_providers' | 'allowed_models' | 'service'> & {
  allowed_providers: string | null;
  allowed_models: string | null;
  service: number;
};

function toKey(r: KeyRow): KeyRecord {
  return {
    ...r,
    service: r.service === 1,
    allowed_providers: r.allowed_providers === null ? null : (JSON.parse(r.allowed_providers) as Provider[]),
    allowed_models: r.allowed_models === null ? null : (JSON.parse(r.allowed_models) as string[]),
  };
}

const KEY_COLUMNS_K = KEY_COLUMNS.split(', ')
  .map((c) => `k.${c}`)
  .join(', ');
const MEMBER_LIMIT_COLUMNS = 'm.rate_limit_rpm, m.budget_usd, m.budget_period, m.budget_mode';
/** A key's columns (unqualified names are the key's) with its member's limits beside them. */
const MEMBER_LIMIT_JOIN =
  'm.rate_limit_rpm AS m_rpm, m.budget_usd AS m_budget_usd, m.budget_period AS m_budget_period, ' +
  'm.budget_mode AS m_budget_mode FROM keys k LEFT JOIN memberships m ' +
  'ON k.service = 0 AND m.org_id = k.org_id AND m.account_id = k.account_id';
interface MemberLimitsRow {
  m_rpm: number | null;
  m_budget_usd: number | null;
  m_budget_period: MemberLimits['budget_period'];
  m_budget_mode: MemberLimits['budget_mode'] | null;
}
const pickMemberLimits = (r: MemberLimits): MemberLimits => ({
  rate_limit_rpm: r.rate_limit_rpm,
  budget_usd: r.budget_usd,
  budget_period: r.budget_period,
  budget_mode: r.budget_mode,
});
function toMemberLimitsOrNull(r: MemberLimitsRow): MemberLimits | null {
  if (r.m_rpm === null && r.m_budget_usd === null) return null;
  return {
    rate_limit_rpm: r.m_rpm,
    budget_usd: r.m_budget_usd,
    budget_period: r.m_budget_period,
    budget_mode: r.m_budget_mode ?? 'soft',
  };
}

const jsonOrNull = (v: readonly string[] | null) => (v === null ? null : JSON.stringify(v));
const ACCOUNT_COLUMNS = 'id, email, password_hash, password_changed_at, created_at';
const AUDIT_COLUMNS = 'id, org_id, at, actor_id, actor_email, action, target, ip, user_agent, before, after';
type AuditRow = Omit<AuditEntry, 'before' | 'after'> & { before: string | null; after: string | null };
const INVITE_COLUMNS = 'id, org_id, role, created_by, created_at, expires_at, used_at, used_by';

const SSO_COLUMNS = 'org_id, issuer, client_id, client_secret, default_role, sso_only, updated_at';
type SsoRow = Omit<SsoConnection, 'domains' | 'sso_only'> & { sso_only: number };
const SSO_FLOW_COLUMNS = 'id_hash, org_id, state, nonce, code_verifier, expires_at';

function isUniqueViolation(err: unknown): boolean {
  return err instanceof Error && 'code' in err && err.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

export class SqliteConfigStore implements ConfigStore {
  private readonly db: Db;
  private readonly stmt: StatementCache;

  constructor(path: string, opts: OpenOptions = {}) {
    this.db = openSqlite(path, opts);
    this.stmt = createStatementCache(this.db);
    const alerts = sqliteAlertStore(this.stmt);
    this.createAlertRule = alerts.createAlertRule;
    this.listAlertRules = alerts.listAlertRules;
    this.listEnabledAlertRules = alerts.listEnabledAlertRules;
    this.setAlertRuleEnabled = alerts.setAlertRuleEnabled;
    this.deleteAlertRule = alerts.deleteAlertRule;
    this.claimAlertDelivery = alerts.claimAlertDelivery;
    this.updateAlertDelivery = alerts.updateAlertDelivery;
    this.listAlertDeliveries = alerts.listAlertDeliveries;
    this.takeOverAlertDeliveries = alerts.takeOverAlertDeliveries;
  }

  readonly createAlertRule: AlertStore['createAlertRule'];
  readonly listAlertRules: AlertStore['listAlertRules'];
  readonly listEnabledAlertRules: AlertStore['listEnabledAlertRules'];
  readonly setAlertRuleEnabled: AlertStore['setAlertRuleEnabled'];
  readonly deleteAlertRule: AlertStore['deleteAlertRule'];
  readonly claimAlertDelivery: AlertStore['claimAlertDelivery'];
  readonly updateAlertDelivery: AlertStore['updateAlertDelivery'];
  readonly listAlertDeliveries: AlertStore['listAlertDeliveries'];
  readonly takeOverAlertDeliveries: AlertStore['takeOverAlertDeliveries'];

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
      // The account and its personal organization exist together or not at all.
      this.db.transaction(() => {
        this.stmt(`INSERT INTO accounts (${ACCOUNT_COLUMNS}) VALUES (?, ?, ?, ?, ?)`).run(
          a.id,
          email,
          a.password_hash,
          now,
          now,
        );
        this.stmt('INSERT INTO orgs (id, name, personal_of, created_at) VALUES (?, ?, ?, ?)').run(
          a.id,
          email,
          a.id,
          now,
        );
        this.stmt('INSERT INTO memberships (org_id, account_id, role, created_at) VALUES (?, ?, ?, ?)').run(
          a.id,
          a.id,
          'owner',
          now,
        );
      });
    } catch (err) {
      if (isUniqueViolation(err) && (await this.getAccountByEmail(email))) throw domainError('email_taken');
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

  async getAccountSettings(accountId: string): Promise<AccountSettings> {
    const row = this.stmt<[string], AccountSettings>(
      'SELECT body_retention_days FROM accounts WHERE id = ?',
    ).get(accountId);
    return { body_retention_days: row?.body_retention_days ?? null };
  }

  async setAccountSettings(accountId: string, s: AccountSettings): Promise<void> {
    this.stmt('UPDATE accounts SET body_retention_days = ? WHERE id = ?').run(
      s.body_retention_days,
      accountId,
    );
  }

  async bodyRetentions(): Promise<Array<{ account_id: string; days: number }>> {
    return this.stmt<[], { account_id: string; days: number }>(
      'SELECT id AS account_id, body_retention_days AS days FROM accounts WHERE body_retention_days IS NOT NULL',
    ).all();
  }

  async createKey(k: {
    id: string;
    account_id: string;
    org_id?: string;
    service?: boolean;
    name: string;
    hash: string;
    hint: string;
    expires_at?: string | null;
  }): Promise<KeyRecord> {
    const rec: KeyRecord = {
      id: k.id,
      name: k.name,
      account_id: k.account_id,
      org_id: k.org_id ?? k.account_id,
      service: k.service ?? false,
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
      budget_unpriced: 'refuse',
      user_rate_limit_rpm: null,
      user_budget_usd: null,
      user_budget_period: null,
      user_budget_mode: 'soft',
    };
    this.stmt(
      'INSERT INTO keys (id, name, account_id, org_id, service, hint, created_at, expires_at, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(
      rec.id,
      rec.name,
      rec.account_id,
      rec.org_id,
      rec.service ? 1 : 0,
      rec.hint,
      rec.created_at,
      rec.expires_at,
      k.hash,
    );
    return rec;
  }

  async getKeyByHash(hash: string): Promise<KeyRecord | null> {
    const row = this.stmt<[string], KeyRow & MemberLimitsRow>(
      `SELECT ${KEY_COLUMNS_K}, ${MEMBER_LIMIT_JOIN} WHERE k.hash = ?`,
    ).get(hash);
    if (!row) return null;
    const { m_rpm, m_budget_usd, m_budget_period, m_budget_mode, ...key } = row;
    return {
      ...toKey(key),
      member_limits: toMemberLimitsOrNull({ m_rpm, m_budget_usd, m_budget_period, m_budget_mode }),
    };
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
       budget_period = ?, budget_mode = ?, rate_limit_tpm = ?, max_concurrent = ?, rate_limit_scope = ?,
       budget_unpriced = ?, user_rate_limit_rpm = ?, user_budget_usd = ?, user_budget_period = ?,
       user_budget_mode = ? WHERE id = ?`,
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
      l.budget_unpriced,
      l.user_rate_limit_rpm,
      l.user_budget_usd,
      l.user_budget_period,
      l.user_budget_mode,
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

  async createOrg(o: { id: string; name: string; owner_id: string }): Promise<Org> {
    const now = new Date().toISOString();
    this.db.transaction(() => {
      this.stmt('INSERT INTO orgs (id, name, personal_of, created_at) VALUES (?, ?, NULL, ?)').run(
        o.id,
        o.name,
        now,
      );
      this.stmt('INSERT INTO memberships (org_id, account_id, role, created_at) VALUES (?, ?, ?, ?)').run(
        o.id,
        o.owner_id,
        'owner',
        now,
      );
    });
    return { id: o.id, name: o.name, personal_of: null, created_at: now };
  }

  async getOrg(id: string): Promise<Org | null> {
    return (
      this.stmt<[string], Org>('SELECT id, name, personal_of, created_at FROM orgs WHERE id = ?').get(id) ??
      null
    );
  }

  async renameOrg(id: string, name: string): Promise<void> {
    this.stmt('UPDATE orgs SET name = ? WHERE id = ?').run(name, id);
  }

  async listOrgsOf(accountId: string): Promise<Array<Org & { role: OrgRole }>> {
    return this.stmt<[string, string], Org & { role: OrgRole }>(
      `SELECT o.id, o.name, o.personal_of, o.created_at, m.role FROM memberships m JOIN orgs o ON o.id = m.org_id
       WHERE m.account_id = ? ORDER BY (o.personal_of IS NOT NULL AND o.personal_of = ?) DESC, o.name, o.id`,
    ).all(accountId, accountId);
  }

  async getRole(orgId: string, accountId: string): Promise<OrgRole | null> {
    const row = this.stmt<[string, string], { role: OrgRole }>(
      'SELECT role FROM memberships WHERE org_id = ? AND account_id = ?',
    ).get(orgId, accountId);
    return row?.role ?? null;
  }

  async listMembers(orgId: string): Promise<Membership[]> {
    return this.stmt<[string], Omit<Membership, 'limits'> & MemberLimits>(
      `SELECT m.org_id, m.account_id, a.email, m.role, m.created_at, ${MEMBER_LIMIT_COLUMNS} FROM memberships m
       JOIN accounts a ON a.id = m.account_id WHERE m.org_id = ? ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'member' THEN 2 ELSE 3 END, m.created_at, a.email`,
    )
      .all(orgId)
      .map((r) => ({
        org_id: r.org_id,
        account_id: r.account_id,
        email: r.email,
        role: r.role,
        created_at: r.created_at,
        limits: pickMemberLimits(r),
      }));
  }

  async getMemberLimits(orgId: string, accountId: string): Promise<MemberLimits | null> {
    const row = this.stmt<[string, string], MemberLimits>(
      `SELECT ${MEMBER_LIMIT_COLUMNS} FROM memberships m WHERE m.org_id = ? AND m.account_id = ?`,
    ).get(orgId, accountId);
    return row ? pickMemberLimits(row) : null;
  }

  async setMemberLimits(orgId: string, accountId: string, l: MemberLimits): Promise<MemberLimits | null> {
    const res = this.stmt(
      `UPDATE memberships SET rate_limit_rpm = ?, budget_usd = ?, budget_period = ?, budget_mode = ?
       WHERE org_id = ? AND account_id = ?`,
    ).run(l.rate_limit_rpm, l.budget_usd, l.budget_period, l.budget_mode, orgId, accountId);
    return Number(res.changes) === 0 ? null : this.getMemberLimits(orgId, accountId);
  }

  async setMember(orgId: string, accountId: string, role: OrgRole): Promise<void> {
    this.stmt(
      `INSERT INTO memberships (org_id, account_id, role, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (org_id, account_id) DO UPDATE SET role = excluded.role`,
    ).run(orgId, accountId, role, new Date().toISOString());
  }

  async removeMember(orgId: string, accountId: string): Promise<void> {
    this.stmt('DELETE FROM memberships WHERE org_id = ? AND account_id = ?').run(orgId, accountId);
  }

  async listOrgKeys(orgId: string, accountId?: string): Promise<KeyRecord[]> {
    const rows =
      accountId === undefined
        ? this.stmt<[string], KeyRow>(
            `SELECT ${KEY_COLUMNS} FROM keys WHERE org_id = ? ORDER BY created_at DESC, id DESC`,
          ).all(orgId)
        : this.stmt<[string, string], KeyRow>(
            `SELECT ${KEY_COLUMNS} FROM keys WHERE org_id = ? AND account_id = ? AND service = 0
             ORDER BY created_at DESC, id DESC`,
          ).all(orgId, accountId);
    return rows.map(toKey);
  }

  async transferKeys(orgId: string, from: string, to: string): Promise<string[]> {
    return this.db.transaction(() => {
      const ids = this.stmt<[string, string], { id: string }>(
        'SELECT id FROM keys WHERE org_id = ? AND account_id = ? AND service = 0',
      )
        .all(orgId, from)
        .map((r) => r.id);
      this.stmt('UPDATE keys SET account_id = ? WHERE org_id = ? AND account_id = ? AND service = 0').run(
        to,
        orgId,
        from,
      );
      return ids;
    });
  }

  async createInvite(i: {
    id: string;
    org_id: string;
    token_hash: string;
    role: OrgRole;
    created_by: string;
    expires_at: string;
  }): Promise<InviteRecord> {
    const rec: InviteRecord = {
      id: i.id,
      org_id: i.org_id,
      role: i.role,
      created_by: i.created_by,
      created_at: new Date().toISOString(),
      expires_at: toIso(i.expires_at),
      used_at: null,
      used_by: null,
    };
    this.stmt(
      `INSERT INTO invites (id, org_id, token_hash, role, created_by, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(rec.id, rec.org_id, i.token_hash, rec.role, rec.created_by, rec.created_at, rec.expires_at);
    return rec;
  }

  async getInviteByHash(tokenHash: string): Promise<InviteRecord | null> {
    return (
      this.stmt<[string], InviteRecord>(`SELECT ${INVITE_COLUMNS} FROM invites WHERE token_hash = ?`).get(
        tokenHash,
      ) ?? null
    );
  }

  async listInvites(orgId: string, now: string): Promise<InviteRecord[]> {
    return this.stmt<[string, string], InviteRecord>(
      `SELECT ${INVITE_COLUMNS} FROM invites WHERE org_id = ? AND used_at IS NULL AND expires_at > ?
       ORDER BY created_at DESC, id DESC`,
    ).all(orgId, toIso(now));
  }

  async deleteInvite(orgId: string, id: string): Promise<boolean> {
    return this.stmt('DELETE FROM invites WHERE org_id = ? AND id = ?').run(orgId, id).changes > 0;
  }

  async claimInvite(tokenHash: string, accountId: string, at: string): Promise<InviteRecord | null> {
    const when = toIso(at);
    const changed = this.stmt(
      'UPDATE invites SET used_at = ?, used_by = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?',
    ).run(when, accountId, tokenHash, when).changes;
    return changed > 0 ? this.getInviteByHash(tokenHash) : null;
  }

  async getSetting(name: string): Promise<string | null> {
    return (
      this.stmt<[string], { value: string }>('SELECT value FROM settings WHERE name = ?').get(name)?.value ??
      null
    );
  }

  async setSetting(name: string, value: string): Promise<void> {
    this.stmt(
      `INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
    ).run(name, value, new Date().toISOString());
  }

  private ssoConnection(row: SsoRow | undefined): SsoConnection | null {
    if (!row) return null;
    const domains = this.stmt<[string], { domain: string }>(
      'SELECT domain FROM sso_domains WHERE org_id = ? ORDER BY domain',
    )
      .all(row.org_id)
      .map((d) => d.domain);
    return { ...row, sso_only: row.sso_only === 1, domains };
  }

  async getSsoConnection(orgId: string): Promise<SsoConnection | null> {
    return this.ssoConnection(
      this.stmt<[string], SsoRow>(`SELECT ${SSO_COLUMNS} FROM sso_connections WHERE org_id = ?`).get(orgId),
    );
  }

  async findSsoConnectionByDomain(domain: string): Promise<SsoConnection | null> {
    const prefixed = SSO_COLUMNS.split(', ')
      .map((c) => `c.${c}`)
      .join(', ');
    return this.ssoConnection(
      this.stmt<[string], SsoRow>(
        `SELECT ${prefixed} FROM sso_domains d JOIN sso_connections c ON c.org_id = d.org_id WHERE d.domain = ?`,
      ).get(domain),
    );
  }

  async putSsoConnection(c: Omit<SsoConnection, 'updated_at'>): Promise<SsoConnection> {
    const now = new Date().toISOString();
    try {
      this.db.transaction(() => {
        this.stmt(
          `INSERT INTO sso_connections (${SSO_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (org_id) DO UPDATE SET issuer = excluded.issuer, client_id = excluded.client_id,
             client_secret = excluded.client_secret, default_role = excluded.default_role,
             sso_only = excluded.sso_only, updated_at = excluded.updated_at`,
        ).run(c.org_id, c.issuer, c.client_id, c.client_secret, c.default_role, c.sso_only ? 1 : 0, now);
        this.stmt('DELETE FROM sso_domains WHERE org_id = ?').run(c.org_id);
        const insert = this.stmt('INSERT INTO sso_domains (domain, org_id) VALUES (?, ?)');
        for (const d of new Set(c.domains)) insert.run(d, c.org_id);
      });
    } catch (err) {
      if (err instanceof Error && 'code' in err && err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
        throw domainError('sso_domain_taken');
      }
      throw err;
    }
    return (await this.getSsoConnection(c.org_id))!;
  }

  async deleteSsoConnection(orgId: string): Promise<boolean> {
    return this.stmt('DELETE FROM sso_connections WHERE org_id = ?').run(orgId).changes > 0;
  }

  async createSsoFlow(f: SsoFlow): Promise<void> {
    const now = new Date().toISOString();
    this.stmt('DELETE FROM sso_flows WHERE expires_at <= ?').run(now);
    this.stmt(`INSERT INTO sso_flows (${SSO_FLOW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`).run(
      f.id_hash,
      f.org_id,
      f.state,
      f.nonce,
      f.code_verifier,
      toIso(f.expires_at),
    );
  }

  async takeSsoFlow(idHash: string, now: string): Promise<SsoFlow | null> {
    const row = this.stmt<[string], SsoFlow>(
      `DELETE FROM sso_flows WHERE id_hash = ? RETURNING ${SSO_FLOW_COLUMNS}`,
    ).get(idHash);
    return row && row.expires_at > toIso(now) ? row : null;
  }

  async appendAudit(e: AuditEntry): Promise<void> {
    this.stmt(`INSERT INTO audit_log (${AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
      e.id,
      e.org_id,
      toIso(e.at),
      e.actor_id,
      e.actor_email,
      e.action,
      e.target,
      e.ip,
      e.user_agent,
      e.before === null ? null : JSON.stringify(e.before),
      e.after === null ? null : JSON.stringify(e.after),
    );
  }

  async listAudit(f: AuditFilter): Promise<AuditEntry[]> {
    const where = ['org_id = ?'];
    const params: (string | number)[] = [f.org_id];
    const add = (sql: string, v: string) => {
      where.push(sql);
      params.push(v);
    };
    if (f.action !== undefined) add('action = ?', f.action);
    if (f.actor_email !== undefined) add('actor_email = ?', f.actor_email);
    if (f.from !== undefined) add('at >= ?', toIso(f.from));
    if (f.to !== undefined) add('at < ?', toIso(f.to));
    if (f.before_id !== undefined) add('id < ?', f.before_id);
    params.push(f.limit);
    return this.stmt<(string | number)[], AuditRow>(
      `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`,
    )
      .all(...params)
      .map((r) => ({
        ...r,
        before: r.before === null ? null : (JSON.parse(r.before) as Record<string, unknown>),
        after: r.after === null ? null : (JSON.parse(r.after) as Record<string, unknown>),
      }));
  }

  async getAuditRetention(orgId: string): Promise<number | null> {
    return (
      this.stmt<[string], { days: number | null }>(
        'SELECT audit_retention_days AS days FROM orgs WHERE id = ?',
      ).get(orgId)?.days ?? null
    );
  }

  async setAuditRetention(orgId: string, days: number | null): Promise<void> {
    this.stmt('UPDATE orgs SET audit_retention_days = ? WHERE id = ?').run(days, orgId);
  }

  async pruneAudit(): Promise<number> {
    // The same cutoff as the delete trigger's, so the statement never asks for a row the trigger refuses.
    return this.stmt(
      `DELETE FROM audit_log WHERE id IN (
         SELECT a.id FROM audit_log a JOIN orgs o ON o.id = a.org_id
         WHERE o.audit_retention_days IS NOT NULL
           AND a.at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || o.audit_retention_days || ' days'))`,
    ).run().changes;
  }

  async createSession(s: SessionRecord): Promise<void> {
    this.stmt(
      `INSERT INTO sessions (id_hash, account_id, created_at, last_seen_at, expires_at, via)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ).run(s.id_hash, s.account_id, toIso(s.created_at), toIso(s.last_seen_at), toIso(s.expires_at), s.via);
  }

  async getSession(idHash: string): Promise<SessionRecord | null> {
    return (
      this.stmt<[string], SessionRecord>(
        'SELECT id_hash, account_id, created_at, last_seen_at, expires_at, via FROM sessions WHERE id_hash = ?',
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

  async listCredentialLabels(accountId: string): Promise<CredentialLabel[]> {
    return this.stmt<[string], CredentialLabel>(
      'SELECT fingerprint, label, updated_at FROM credential_labels WHERE account_id = ? ORDER BY fingerprint',
    ).all(accountId);
  }

  async setCredentialLabel(accountId: string, fingerprint: string, label: string | null): Promise<void> {
    if (label === null) {
      this.stmt('DELETE FROM credential_labels WHERE account_id = ? AND fingerprint = ?').run(
        accountId,
        fingerprint,
      );
      return;
    }
    this.stmt(
      `INSERT INTO credential_labels (account_id, fingerprint, label, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (account_id, fingerprint) DO UPDATE SET label = excluded.label, updated_at = excluded.updated_at`,
    ).run(accountId, fingerprint, label, new Date().toISOString());
  }

  async listProviderKeyLinks(): Promise<ProviderKeyLink[]> {
    return this.stmt<[], ProviderKeyLink>(
      'SELECT provider, api_key_id, fingerprint, created_at FROM provider_key_links ORDER BY provider, api_key_id',
    ).all();
  }

  async setProviderKeyLink(provider: string, apiKeyId: string, fingerprint: string | null): Promise<void> {
    if (fingerprint === null) {
      this.stmt('DELETE FROM provider_key_links WHERE provider = ? AND api_key_id = ?').run(
        provider,
        apiKeyId,
      );
      return;
    }
    this.stmt(
      `INSERT INTO provider_key_links (provider, api_key_id, fingerprint, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (provider, api_key_id) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at`,
    ).run(provider, apiKeyId, fingerprint, new Date().toISOString());
  }

  async createApiToken(t: Omit<ApiTokenRecord, 'revoked_at'> & { hash: string }): Promise<void> {
    this.stmt(
      `INSERT INTO api_tokens (id, account_id, name, hash, hint, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(t.id, t.account_id, t.name, t.hash, t.hint, JSON.stringify(t.scopes), toIso(t.created_at));
  }

  async listApiTokens(accountId: string): Promise<ApiTokenRecord[]> {
    return this.stmt<[string], TokenRow>(
      `SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE account_id = ? ORDER BY created_at DESC, id DESC`,
    )
      .all(accountId)
      .map(toToken);
  }

  async getApiTokenByHash(hash: string): Promise<ApiTokenRecord | null> {
    const r = this.stmt<[string], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE hash = ?`).get(
      hash,
    );
    return r ? toToken(r) : null;
  }

  async revokeApiToken(accountId: string, id: string, at: string): Promise<boolean> {
    this.stmt(
      'UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL',
    ).run(toIso(at), id, accountId);
    const r = this.stmt<[string, string], { revoked_at: string | null }>(
      'SELECT revoked_at FROM api_tokens WHERE id = ? AND account_id = ?',
    ).get(id, accountId);
    return r?.revoked_at != null;
  }
}

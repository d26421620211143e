/** ConfigStore on PostgreSQL: shared by every instance, so writes are single statements that race safely. */
import type pg from 'pg';
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
  BudgetMode,
  BudgetPeriod,
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
  RpmScope,
  UnpricedPolicy,
  SessionRecord,
  SsoConnection,
  SsoFlow,
} from '../types.js';
import { isoOrNull, pgErrorCode, resolvePool, runPgMigrations } from './db.js';
import { CONFIG_MIGRATIONS } from './config-schema.js';
import { pgAlertStore } from './alerts.js';
import type { AlertStore } from '../alert-types.js';

// Tests upgrade databases from older schemas with them.
export { CONFIG_MIGRATIONS };

/** Most rows one keyChangesSince answers; a caller further behind asks again from the returned seq. */
const KEY_CHANGES_PAGE = 1_000;

const KEY_COLUMNS =
  'id, name, account_id, org_id, hint, created_at, last_used_at, expires_at, revoked_at, ' +
  'allowed_providers, allowed_models, rate_limit_rpm, budget_usd, budget_period, ' +
  'budget_mode, rate_limit_tpm, max_concurrent, rate_limit_scope, budget_unpriced, service, ' +
  'user_rate_limit_rpm, user_budget_usd, user_budget_period, user_budget_mode';
const ACCOUNT_COLUMNS = 'id, email, password_hash, password_changed_at, created_at';
const SESSION_COLUMNS = 'id_hash, account_id, created_at, last_seen_at, expires_at, via';
const AUDIT_COLUMNS = 'id, org_id, at, actor_id, actor_email, action, target, ip, user_agent, before, after';
const INVITE_COLUMNS = 'id, org_id, role, created_by, created_at, expires_at, used_at, used_by';
const ORG_COLUMNS = 'id, name, personal_of, created_at';

type Row = Record<string, unknown>;

const KEY_COLUMNS_K = KEY_COLUMNS.split(', ')
  .map((c) => `k.${c}`)
  .join(', ');
const MEMBER_LIMIT_COLUMNS = 'm.rate_limit_rpm, m.budget_usd, m.budget_period, m.budget_mode';
/** A key's columns (qualified by k.) with its member's limits beside them. */
const MEMBER_LIMIT_JOIN =
  'm.rate_limit_rpm AS m_rpm, m.budget_usd AS m_budget_usd, m.budget_period AS m_budget_period, ' +
  'm.budget_mode AS m_budget_mode FROM keys k LEFT JOIN memberships m ' +
  'ON NOT k.service AND m.org_id = k.org_id AND m.account_id = k.account_id';
function toMemberLimits(r: Row): MemberLimits {
  return {
    rate_limit_rpm: (r.rate_limit_rpm as number | null) ?? null,
    budget_usd: (r.budget_usd as number | null) ?? null,
    budget_period: (r.budget_period as BudgetPeriod | null) ?? null,
    budget_mode: (r.budget_mode as BudgetMode | null) ?? 'soft',
  };
}

const TOKEN_COLUMNS = 'id, account_id, name, hint, scopes, created_at, revoked_at';
function toToken(r: Row): ApiTokenRecord {
  return {
    id: r.id as string,
    account_id: r.account_id as string,
    name: r.name as string,
    hint: r.hint as string,
    scopes: r.scopes as ApiTokenScope[],
    created_at: isoOrNull(r.created_at)!,
    revoked_at: isoOrNull(r.revoked_at),
  };
}

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
    org_id: r.org_id as string,
    service: r.service === true,
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
    budget_unpriced: (r.budget_unpriced as UnpricedPolicy | undefined) ?? 'refuse',
    user_rate_limit_rpm: (r.user_rate_limit_rpm as number | null) ?? null,
    user_budget_usd: (r.user_budget_usd as number | null) ?? null,
    user_budget_period: (r.user_budget_period as BudgetPeriod | null) ?? null,
    user_budget_mode: (r.user_budget_mode as BudgetMode | undefined) ?? 'soft',
  };
}

function toOrg(r: Row): Org {
  return {
    id: r.id as string,
    name: r.name as string,
    personal_of: (r.personal_of as string | null) ?? null,
    created_at: isoOrNull(r.created_at)!,
  };
}

function toInvite(r: Row): InviteRecord {
  return {
    id: r.id as string,
    org_id: r.org_id as string,
    role: r.role as OrgRole,
    created_by: r.created_by as string,
    created_at: isoOrNull(r.created_at)!,
    expires_at: isoOrNull(r.expires_at)!,
    used_at: isoOrNull(r.used_at),
    used_by: (r.used_by as string | null) ?? null,
  };
}

function toSession(r: Row): SessionRecord {
  return {
    id_hash: r.id_hash as string,
    account_id: r.account_id as string,
    created_at: isoOrNull(r.created_at)!,
    last_seen_at: isoOrNull(r.last_seen_at)!,
    expires_at: isoOrNull(r.expires_at)!,
    via: (r.via as SessionRecord['via']) ?? null,
  };
}

const SSO_COLUMNS = 'org_id, issuer, client_id, client_secret, default_role, sso_only, updated_at';
const SSO_FLOW_COLUMNS = 'id_hash, org_id, state, nonce, code_verifier, expires_at';

function toSsoFlow(r: Row): SsoFlow {
  return {
    id_hash: r.id_hash as string,
    org_id: r.org_id as string,
    state: r.state as string,
    nonce: r.nonce as string,
    code_verifier: r.code_verifier as string,
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
    const alerts = pgAlertStore(pool);
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
      // One statement: the account and its personal organization exist together or not at all.
      await this.pool.query(
        `WITH a AS (INSERT INTO accounts (${ACCOUNT_COLUMNS}) VALUES ($1, $2, $3, $4, $4) RETURNING id),
              o AS (INSERT INTO orgs (${ORG_COLUMNS}) SELECT id, $2, id, $4 FROM a RETURNING id)
         INSERT INTO memberships (org_id, account_id, role, created_at) SELECT id, id, 'owner', $4 FROM o`,
        [a.id, email, a.password_hash, now],
      );
    } catch (err) {
      if (pgErrorCode(err) === '23505' && (await this.getAccountByEmail(email)))
        throw domainError('email_taken');
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

  async getAccountSettings(accountId: string): Promise<AccountSettings> {
    const [r] = await this.rows('SELECT body_retention_days FROM accounts WHERE id = $1', [accountId]);
    return { body_retention_days: (r?.body_retention_days as number | null | undefined) ?? null };
  }

  async setAccountSettings(accountId: string, s: AccountSettings): Promise<void> {
    await this.pool.query('UPDATE accounts SET body_retention_days = $1 WHERE id = $2', [
      s.body_retention_days,
      accountId,
    ]);
  }

  async bodyRetentions(): Promise<Array<{ account_id: string; days: number }>> {
    const rows = await this.rows(
      'SELECT id, body_retention_days FROM accounts WHERE body_retention_days IS NOT NULL',
      [],
    );
    return rows.map((r) => ({ account_id: r.id as string, days: r.body_retention_days as number }));
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
    const [r] = await this.rows(
      `INSERT INTO keys (id, account_id, org_id, service, name, hash, hint, created_at, expires_at)
       VALUES ($1, $2, $3, $9, $4, $5, $6, $7, $8) RETURNING ${KEY_COLUMNS}`,
      [
        k.id,
        k.account_id,
        k.org_id ?? k.account_id,
        k.name,
        k.hash,
        k.hint,
        new Date().toISOString(),
        toIsoOrNull(k.expires_at),
        k.service ?? false,
      ],
    );
    return toKey(r!);
  }

  async getKeyByHash(hash: string): Promise<KeyRecord | null> {
    const [r] = await this.rows(`SELECT ${KEY_COLUMNS_K}, ${MEMBER_LIMIT_JOIN} WHERE k.hash = $1`, [hash]);
    if (!r) return null;
    const m = toMemberLimits({
      rate_limit_rpm: r.m_rpm,
      budget_usd: r.m_budget_usd,
      budget_period: r.m_budget_period,
      budget_mode: r.m_budget_mode,
    });
    return { ...toKey(r), member_limits: m.rate_limit_rpm === null && m.budget_usd === null ? null : m };
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
       budget_period = $5, budget_mode = $6, rate_limit_tpm = $7, max_concurrent = $8, rate_limit_scope = $9,
       budget_unpriced = $10, user_rate_limit_rpm = $11, user_budget_usd = $12, user_budget_period = $13,
       user_budget_mode = $14 WHERE id = $15 RETURNING ${KEY_COLUMNS}`,
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
        l.budget_unpriced,
        l.user_rate_limit_rpm,
        l.user_budget_usd,
        l.user_budget_period,
        l.user_budget_mode,
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

  async createOrg(o: { id: string; name: string; owner_id: string }): Promise<Org> {
    const now = new Date().toISOString();
    const [r] = await this.rows(
      `WITH o AS (INSERT INTO orgs (${ORG_COLUMNS}) VALUES ($1, $2, NULL, $3) RETURNING ${ORG_COLUMNS}),
            m AS (INSERT INTO memberships (org_id, account_id, role, created_at) SELECT id, $4, 'owner', $3 FROM o)
       SELECT * FROM o`,
      [o.id, o.name, now, o.owner_id],
    );
    return toOrg(r!);
  }

  async getOrg(id: string): Promise<Org | null> {
    const [r] = await this.rows(`SELECT ${ORG_COLUMNS} FROM orgs WHERE id = $1`, [id]);
    return r ? toOrg(r) : null;
  }

  async renameOrg(id: string, name: string): Promise<void> {
    await this.pool.query('UPDATE orgs SET name = $1 WHERE id = $2', [name, id]);
  }

  async listOrgsOf(accountId: string): Promise<Array<Org & { role: OrgRole }>> {
    const rows = await this.rows(
      `SELECT o.id, o.name, o.personal_of, o.created_at, m.role FROM memberships m JOIN orgs o ON o.id = m.org_id
       WHERE m.account_id = $1 ORDER BY (o.personal_of IS NOT DISTINCT FROM $1) DESC, o.name, o.id COLLATE "C"`,
      [accountId],
    );
    return rows.map((r) => ({ ...toOrg(r), role: r.role as OrgRole }));
  }

  async getRole(orgId: string, accountId: string): Promise<OrgRole | null> {
    const [r] = await this.rows('SELECT role FROM memberships WHERE org_id = $1 AND account_id = $2', [
      orgId,
      accountId,
    ]);
    return r ? (r.role as OrgRole) : null;
  }

  async listMembers(orgId: string): Promise<Membership[]> {
    const rows = await this.rows(
      `SELECT m.org_id, m.account_id, a.email, m.role, m.created_at, ${MEMBER_LIMIT_COLUMNS} FROM memberships m
       JOIN accounts a ON a.id = m.account_id WHERE m.org_id = $1 ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'member' THEN 2 ELSE 3 END, m.created_at, a.email`,
      [orgId],
    );
    return rows.map((r) => ({
      org_id: r.org_id as string,
      account_id: r.account_id as string,
      email: r.email as string,
      role: r.role as OrgRole,
      created_at: isoOrNull(r.created_at)!,
      limits: toMemberLimits(r),
    }));
  }

  async getMemberLimits(orgId: string, accountId: string): Promise<MemberLimits | null> {
    const [r] = await this.rows(
      `SELECT ${MEMBER_LIMIT_COLUMNS} FROM memberships m WHERE m.org_id = $1 AND m.account_id = $2`,
      [orgId, accountId],
    );
    return r ? toMemberLimits(r) : null;
  }

  async setMemberLimits(orgId: string, accountId: string, l: MemberLimits): Promise<MemberLimits | null> {
    const [r] = await this.rows(
      `UPDATE memberships m SET rate_limit_rpm = $3, budget_usd = $4, budget_period = $5, budget_mode = $6
       WHERE m.org_id = $1 AND m.account_id = $2 RETURNING ${MEMBER_LIMIT_COLUMNS}`,
      [orgId, accountId, l.rate_limit_rpm, l.budget_usd, l.budget_period, l.budget_mode],
    );
    return r ? toMemberLimits(r) : null;
  }

  async setMember(orgId: string, accountId: string, role: OrgRole): Promise<void> {
    await this.pool.query(
      `INSERT INTO memberships (org_id, account_id, role, created_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (org_id, account_id) DO UPDATE SET role = excluded.role`,
      [orgId, accountId, role],
    );
  }

  async removeMember(orgId: string, accountId: string): Promise<void> {
    await this.pool.query('DELETE FROM memberships WHERE org_id = $1 AND account_id = $2', [
      orgId,
      accountId,
    ]);
  }

  async listOrgKeys(orgId: string, accountId?: string): Promise<KeyRecord[]> {
    const rows =
      accountId === undefined
        ? await this.rows(
            `SELECT ${KEY_COLUMNS} FROM keys WHERE org_id = $1 ORDER BY created_at DESC, id COLLATE "C" DESC`,
            [orgId],
          )
        : await this.rows(
            `SELECT ${KEY_COLUMNS} FROM keys WHERE org_id = $1 AND account_id = $2 AND NOT service
             ORDER BY created_at DESC, id COLLATE "C" DESC`,
            [orgId, accountId],
          );
    return rows.map(toKey);
  }

  async transferKeys(orgId: string, from: string, to: string): Promise<string[]> {
    const rows = await this.rows(
      'UPDATE keys SET account_id = $3 WHERE org_id = $1 AND account_id = $2 AND NOT service RETURNING id',
      [orgId, from, to],
    );
    return rows.map((r) => r.id as string);
  }

  async createInvite(i: {
    id: string;
    org_id: string;
    token_hash: string;
    role: OrgRole;
    created_by: string;
    expires_at: string;
  }): Promise<InviteRecord> {
    const [r] = await this.rows(
      `INSERT INTO invites (id, org_id, token_hash, role, created_by, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${INVITE_COLUMNS}`,
      [i.id, i.org_id, i.token_hash, i.role, i.created_by, new Date().toISOString(), toIso(i.expires_at)],
    );
    return toInvite(r!);
  }

  async getInviteByHash(tokenHash: string): Promise<InviteRecord | null> {
    const [r] = await this.rows(`SELECT ${INVITE_COLUMNS} FROM invites WHERE token_hash = $1`, [tokenHash]);
    return r ? toInvite(r) : null;
  }

  async listInvites(orgId: string, now: string): Promise<InviteRecord[]> {
    const rows = await this.rows(
      `SELECT ${INVITE_COLUMNS} FROM invites WHERE org_id = $1 AND used_at IS NULL AND expires_at > $2
       ORDER BY created_at DESC, id COLLATE "C" DESC`,
      [orgId, toIso(now)],
    );
    return rows.map(toInvite);
  }

  async deleteInvite(orgId: string, id: string): Promise<boolean> {
    const r = await this.pool.query('DELETE FROM invites WHERE org_id = $1 AND id = $2', [orgId, id]);
    return (r.rowCount ?? 0) > 0;
  }

  async claimInvite(tokenHash: string, accountId: string, at: string): Promise<InviteRecord | null> {
    const when = toIso(at);
    const [r] = await this.rows(
      `UPDATE invites SET used_at = $1, used_by = $2 WHERE token_hash = $3 AND used_at IS NULL AND expires_at > $1
       RETURNING ${INVITE_COLUMNS}`,
      [when, accountId, tokenHash],
    );
    return r ? toInvite(r) : null;
  }

  async getSetting(name: string): Promise<string | null> {
    const [r] = await this.rows('SELECT value FROM settings WHERE name = $1', [name]);
    return r ? (r.value as string) : null;
  }

  async setSetting(name: string, value: string): Promise<void> {
    await this.pool.query(
      `INSERT INTO settings (name, value, updated_at) VALUES ($1, $2, now())
       ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      [name, value],
    );
  }

  private async ssoConnectionWhere(where: string, param: string): Promise<SsoConnection | null> {
    const cols = SSO_COLUMNS.split(', ')
      .map((c) => `c.${c}`)
      .join(', ');
    const [r] = await this.rows(
      `SELECT ${cols}, COALESCE((SELECT array_agg(d.domain ORDER BY d.domain) FROM sso_domains d
         WHERE d.org_id = c.org_id), '{}') AS domains
       FROM sso_connections c WHERE ${where}`,
      [param],
    );
    if (!r) return null;
    return {
      org_id: r.org_id as string,
      issuer: r.issuer as string,
      client_id: r.client_id as string,
      client_secret: r.client_secret as string,
      domains: r.domains as string[],
      default_role: r.default_role as SsoConnection['default_role'],
      sso_only: r.sso_only as boolean,
      updated_at: isoOrNull(r.updated_at)!,
    };
  }

  async getSsoConnection(orgId: string): Promise<SsoConnection | null> {
    return this.ssoConnectionWhere('c.org_id = $1', orgId);
  }

  async findSsoConnectionByDomain(domain: string): Promise<SsoConnection | null> {
    return this.ssoConnectionWhere('c.org_id = (SELECT org_id FROM sso_domains WHERE domain = $1)', domain);
  }

  async putSsoConnection(c: Omit<SsoConnection, 'updated_at'>): Promise<SsoConnection> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO sso_connections (${SSO_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, now())
         ON CONFLICT (org_id) DO UPDATE SET issuer = excluded.issuer, client_id = excluded.client_id,
           client_secret = excluded.client_secret, default_role = excluded.default_role,
           sso_only = excluded.sso_only, updated_at = excluded.updated_at`,
        [c.org_id, c.issuer, c.client_id, c.client_secret, c.default_role, c.sso_only],
      );
      await client.query('DELETE FROM sso_domains WHERE org_id = $1', [c.org_id]);
      await client.query('INSERT INTO sso_domains (domain, org_id) SELECT DISTINCT unnest($1::text[]), $2', [
        c.domains,
        c.org_id,
      ]);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      if (pgErrorCode(err) === '23505') throw domainError('sso_domain_taken');
      throw err;
    } finally {
      client.release();
    }
    return (await this.getSsoConnection(c.org_id))!;
  }

  async deleteSsoConnection(orgId: string): Promise<boolean> {
    return (
      ((await this.pool.query('DELETE FROM sso_connections WHERE org_id = $1', [orgId])).rowCount ?? 0) > 0
    );
  }

  async createSsoFlow(f: SsoFlow): Promise<void> {
    await this.pool.query('DELETE FROM sso_flows WHERE expires_at <= now()');
    await this.pool.query(`INSERT INTO sso_flows (${SSO_FLOW_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`, [
      f.id_hash,
      f.org_id,
      f.state,
      f.nonce,
      f.code_verifier,
      toIso(f.expires_at),
    ]);
  }

  async takeSsoFlow(idHash: string, now: string): Promise<SsoFlow | null> {
    const [r] = await this.rows(`DELETE FROM sso_flows WHERE id_hash = $1 RETURNING ${SSO_FLOW_COLUMNS}`, [
      idHash,
    ]);
    return r && Date.parse(isoOrNull(r.expires_at)!) > Date.parse(now) ? toSsoFlow(r) : null;
  }

  async appendAudit(e: AuditEntry): Promise<void> {
    await this.pool.query(
      `INSERT INTO audit_log (${AUDIT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
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
      ],
    );
  }

  async getAuditRetention(orgId: string): Promise<number | null> {
    const [r] = await this.rows('SELECT audit_retention_days FROM orgs WHERE id = $1', [orgId]);
    return (r?.audit_retention_days as number | null | undefined) ?? null;
  }

  async setAuditRetention(orgId: string, days: number | null): Promise<void> {
    await this.pool.query('UPDATE orgs SET audit_retention_days = $1 WHERE id = $2', [days, orgId]);
  }

  async pruneAudit(): Promise<number> {
    // The same cutoff as the delete trigger's, so the statement never asks for a row the trigger refuses.
    const r = await this.pool.query(
      `DELETE FROM audit_log a USING orgs o
       WHERE o.id = a.org_id AND o.audit_retention_days IS NOT NULL
         AND a.at < now() - o.audit_retention_days * interval '1 day'`,
    );
    return r.rowCount ?? 0;
  }

  async listAudit(f: AuditFilter): Promise<AuditEntry[]> {
    const params: unknown[] = [f.org_id];
    const where = ['org_id = $1'];
    const add = (sql: string, v: unknown) => where.push(sql.replace('?', `$${params.push(v)}`));
    if (f.action !== undefined) add('action = ?', f.action);
    if (f.actor_email !== undefined) add('actor_email = ?', f.actor_email);
    if (f.from !== undefined) add('at >= ?', toIso(f.from));
    if (f.to !== undefined) add('at < ?', toIso(f.to));
    if (f.before_id !== undefined) add('id COLLATE "C" < ?', f.before_id);
    params.push(f.limit);
    const rows = await this.rows(
      `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where.join(' AND ')}
       ORDER BY id COLLATE "C" DESC LIMIT $${params.length}`,
      params,
    );
    return rows.map((r) => ({
      id: r.id as string,
      org_id: r.org_id as string,
      at: isoOrNull(r.at)!,
      actor_id: (r.actor_id as string | null) ?? null,
      actor_email: (r.actor_email as string | null) ?? null,
      action: r.action as string,
      target: (r.target as string | null) ?? null,
      ip: (r.ip as string | null) ?? null,
      user_agent: (r.user_agent as string | null) ?? null,
      before: (r.before as Record<string, unknown> | null) ?? null,
      after: (r.after as Record<string, unknown> | null) ?? null,
    }));
  }

  async createSession(s: SessionRecord): Promise<void> {
    await this.pool.query(`INSERT INTO sessions (${SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`, [
      s.id_hash,
      s.account_id,
      toIso(s.created_at),
      toIso(s.last_seen_at),
      toIso(s.expires_at),
      s.via,
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

  async listCredentialLabels(accountId: string): Promise<CredentialLabel[]> {
    const { rows } = await this.pool.query<Row>(
      'SELECT fingerprint, label, updated_at FROM credential_labels WHERE account_id = $1 ORDER BY fingerprint',
      [accountId],
    );
    return rows.map((r) => ({
      fingerprint: r.fingerprint as string,
      label: r.label as string,
      updated_at: isoOrNull(r.updated_at)!,
    }));
  }

  async setCredentialLabel(accountId: string, fingerprint: string, label: string | null): Promise<void> {
    if (label === null) {
      await this.pool.query('DELETE FROM credential_labels WHERE account_id = $1 AND fingerprint = $2', [
        accountId,
        fingerprint,
      ]);
      return;
    }
    await this.pool.query(
      `INSERT INTO credential_labels (account_id, fingerprint, label, updated_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (account_id, fingerprint) DO UPDATE SET label = excluded.label, updated_at = excluded.updated_at`,
      [accountId, fingerprint, label],
    );
  }

  async listProviderKeyLinks(): Promise<ProviderKeyLink[]> {
    const { rows } = await this.pool.query<Row>(
      'SELECT provider, api_key_id, fingerprint, created_at FROM provider_key_links ORDER BY provider, api_key_id',
    );
    return rows.map((r) => ({
      provider: r.provider as string,
      api_key_id: r.api_key_id as string,
      fingerprint: r.fingerprint as string,
      created_at: isoOrNull(r.created_at)!,
    }));
  }

  async setProviderKeyLink(provider: string, apiKeyId: string, fingerprint: string | null): Promise<void> {
    if (fingerprint === null) {
      await this.pool.query('DELETE FROM provider_key_links WHERE provider = $1 AND api_key_id = $2', [
        provider,
        apiKeyId,
      ]);
      return;
    }
    await this.pool.query(
      `INSERT INTO provider_key_links (provider, api_key_id, fingerprint, created_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (provider, api_key_id) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at`,
      [provider, apiKeyId, fingerprint],
    );
  }

  async createApiToken(t: Omit<ApiTokenRecord, 'revoked_at'> & { hash: string }): Promise<void> {
    await this.pool.query(
      `INSERT INTO api_tokens (id, account_id, name, hash, hint, scopes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [t.id, t.account_id, t.name, t.hash, t.hint, t.scopes, t.created_at],
    );
  }

  async listApiTokens(accountId: string): Promise<ApiTokenRecord[]> {
    const { rows } = await this.pool.query<Row>(
      `SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE account_id = $1 ORDER BY created_at DESC, id DESC`,
      [accountId],
    );
    return rows.map(toToken);
  }

  async getApiTokenByHash(hash: string): Promise<ApiTokenRecord | null> {
    const { rows } = await this.pool.query<Row>(`SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE hash = $1`, [
      hash,
    ]);
    return rows[0] ? toToken(rows[0]) : null;
  }

  async revokeApiToken(accountId: string, id: string, at: string): Promise<boolean> {
    await this.pool.query(
      'UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL',
      [at, id, accountId],
    );
    const { rows } = await this.pool.query<Row>(
      'SELECT revoked_at FROM api_tokens WHERE id = $1 AND account_id = $2',
      [id, accountId],
    );
    return rows[0]?.revoked_at != null;
  }
}

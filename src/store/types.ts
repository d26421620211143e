/**
 * Storage interfaces. Two stores, as in bifrost: a small config store (accounts, keys, sessions) and a
 * high-volume log store. Each has a SQLite and a PostgreSQL implementation; only src/store/factory.ts
 * imports a concrete one. test/store-contract.test.ts runs every method on both.
 */
import type { Outcome, Provider, RequestLogRow } from '../types.js';
import type { AlertStore } from './alert-types.js';
import type { BatchStore } from './batch-types.js';

export interface Account {
  id: string;
  email: string; // lower-cased
  created_at: string;
}

/** An account's own settings (the console's Settings page). */
export interface AccountSettings {
  /** Stored request and response bodies are dropped after this many days; null: kept as long as the rows. */
  body_retention_days: number | null;
}

/** From when an account's rows lose their bodies (LogStore.prune). */
export interface BodyCutoff {
  account_id: string;
  before: string;
}

export interface AccountWithSecret extends Account {
  password_hash: string;
  password_changed_at: string;
}

export type KeyStatus = 'active' | 'revoked' | 'expired';
export type BudgetPeriod = 'day' | 'month';
/** `soft`: admitted while spend < budget; `hard`: each request reserves an upper bound of its cost first. */
export type BudgetMode = 'soft' | 'hard';
/** What counts against rate_limit_rpm: `billable` leaves out listings, retrievals and token counting. */
export type RpmScope = 'billable' | 'all';
/** A hard budget's calls keyrelay cannot price: `refuse` them (403), or `allow` them at a reserved cost of 0. */
export type UnpricedPolicy = 'refuse' | 'allow';

/** Per-key controls (enforced by src/limits/); null = unlimited / any. */
export interface KeyLimits {
  allowed_providers: Provider[] | null;
  /** Exact model names or `prefix*` patterns, matched against the request body's model. */
  allowed_models: string[] | null;
  rate_limit_rpm: number | null;
  budget_usd: number | null;
  /** UTC calendar period of the budget; null exactly when budget_usd is null. */
  budget_period: BudgetPeriod | null;
  /** Kept when the budget is removed, so a budget set again later keeps its mode. */
  budget_mode: BudgetMode;
  /** Tokens (input + output) per minute, sliding like the rpm. */
  rate_limit_tpm: number | null;
  /** Requests in flight at once (a WebSocket response counts while it is generated). */
  max_concurrent: number | null;
  rate_limit_scope: RpmScope;
  /** Read under a hard budget only; kept, like the mode, when the budget is removed. */
  budget_unpriced: UnpricedPolicy;
  /** Requests per minute for each end user (`proxy-user`) of the key, counted like rate_limit_rpm. */
  user_rate_limit_rpm: number | null;
  /** Spend per end user of the key, per UTC period; under the key's own budget, if any. */
  user_budget_usd: number | null;
  /** Null exactly when user_budget_usd is null. */
  user_budget_period: BudgetPeriod | null;
  /** As budget_mode; a hard one's unpriced calls follow budget_unpriced. */
  user_budget_mode: BudgetMode;
}

export interface KeyRecord extends KeyLimits {
  id: string;
  name: string;
  /**
   * The member who holds the key; for a service key, the admin who created it (the key's request rows carry
   * this account), who holds nothing: removing them leaves the key working.
   */
  account_id: string;
  /** The organization's own key, held by no member: only owners and admins see and change it. */
  service: boolean;
  /** The organization that owns it (an account's personal organization has the account's id). */
  org_id: string;
  /**
   * Read by getKeyByHash only (the proxy's read): the limits of the key's member across all their keys in
   * the organization; null for a service key or a member without any. Other reads leave it out.
   */
  member_limits?: MemberLimits | null;
  hint: string; // kr_ab12…wxyz
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

/** A key as the API shows it: status is derived from revoked_at / expires_at at read time. */
export interface KeyView extends KeyRecord {
  status: KeyStatus;
}

/** A budget's spend in its current UTC period, and when the period ends (the console's Keys page, the CLI). */
export interface KeyBudgetStatus {
  spent_usd: number;
  budget_usd: number;
  period_start: string;
  resets_at: string;
}

/**
 * A requests- or tokens-per-minute limit's headroom now, as the limiter counts it (the console's Keys page,
 * the CLI): `used` is the sliding-window estimate a request is admitted against (docs/limits.md).
 */
export interface RateHeadroom {
  used: number;
  limit: number;
  /** While the window is full: when one more request (or token) fits; null while one fits now. */
  frees_at: string | null;
  /** When nothing counted so far weighs on the window any more; null with nothing counted. */
  clears_at: string | null;
}

/** A key's rate limits' headroom: null for a limit the key does not have. */
export interface KeyRateStatus {
  rpm: RateHeadroom | null;
  tpm: RateHeadroom | null;
}

/** A page of the key change feed (ConfigStore.keyChangesSince). */
export interface KeyChanges {
  seq: number;
  keyIds: string[];
}

/** What a member may do in an organization (docs/teams.md has the table). */
export type OrgRole = 'owner' | 'admin' | 'member' | 'viewer';
export const ORG_ROLES: readonly OrgRole[] = ['owner', 'admin', 'member', 'viewer'];

export interface Org {
  id: string;
  name: string;
  /** The account whose personal organization this is (created with the account, id = the account's id). */
  personal_of: string | null;
  created_at: string;
}

export interface Membership {
  org_id: string;
  account_id: string;
  email: string;
  role: OrgRole;
  created_at: string;
  limits: MemberLimits;
}

/**
 * Limits on the sum of one member's keys in an organization (service keys are no member's), beside each
 * key's own: both apply (docs/limits.md, "Per member"). Null: none.
 */
export interface MemberLimits {
  rate_limit_rpm: number | null;
  budget_usd: number | null;
  /** Null exactly when budget_usd is null. */
  budget_period: BudgetPeriod | null;
  /** Kept when the budget is removed, as a key's. */
  budget_mode: BudgetMode;
}

export const NO_MEMBER_LIMITS: MemberLimits = {
  rate_limit_rpm: null,
  budget_usd: null,
  budget_period: null,
  budget_mode: 'soft',
};

/** An invitation; the token itself is shown once and only its SHA-256 is kept. */
export interface InviteRecord {
  id: string;
  org_id: string;
  role: OrgRole;
  created_by: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  used_by: string | null;
}

/**
 * One audit entry: who did what, when, from where, in which organization. `before` and `after` hold what
 * changed (names, roles, limits), never a secret: no key, token, password or hash is ever put in them.
 */
export interface AuditEntry {
  id: string;
  org_id: string;
  at: string;
  /** The account that acted; null for a failed sign-in or the CLI. */
  actor_id: string | null;
  actor_email: string | null;
  action: string;
  /** What the action was on: a key id, an account id, an invitation id. */
  target: string | null;
  ip: string | null;
  user_agent: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

export interface AuditFilter {
  org_id: string;
  action?: string;
  actor_email?: string;
  from?: string;
  to?: string;
  /** Entries older than this id (the previous page's last). */
  before_id?: string;
  limit: number;
}

/**
 * An organization's OpenID Connect connection (docs/teams.md, "Single sign-on"). `client_secret` is read by
 * the sign-in flow only: no route returns it and nothing logs it.
 */
export interface SsoConnection {
  org_id: string;
  issuer: string;
  client_id: string;
  client_secret: string;
  /** Email domains (lower case) whose people sign in here; each domain belongs to one organization. */
  domains: string[];
  /** The role a person gets when their first SSO sign-in makes them a member. */
  default_role: Exclude<OrgRole, 'owner'>;
  /** Password sign-in is refused for the organization's members other than its owners. */
  sso_only: boolean;
  updated_at: string;
}

/** A sign-in started at the identity provider, until its callback takes it (once). */
export interface SsoFlow {
  /** SHA-256 of the random value in the browser's flow cookie: binds the callback to that browser. */
  id_hash: string;
  org_id: string;
  state: string;
  nonce: string;
  code_verifier: string;
  expires_at: string;
}

export interface SessionRecord {
  id_hash: string; // SHA-256 of the session token; the token itself lives only in the cookie
  account_id: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string; // absolute expiry
  /** How the session was signed in; null for one from before this was recorded (taken as `password`). */
  via: SessionVia | null;
}

export type SessionVia = 'password' | 'sso';

/** An account's name for a provider credential, by its keyed fingerprint (RequestLogRow.credential_fingerprint). */
export interface CredentialLabel {
  fingerprint: string;
  label: string;
  updated_at: string;
}

/**
 * The install owner's tie of a provider's API key id (as its usage report names it) to a provider credential
 * keyrelay saw, by the credential's keyed fingerprint (reconcile/).
 */
export interface ProviderKeyLink {
  provider: string;
  api_key_id: string;
  fingerprint: string;
  created_at: string;
}

/** What a read-only API token may read (docs/console-api.md, "API tokens"). */
export const API_TOKEN_SCOPES = ['usage', 'requests', 'export'] as const;
export type ApiTokenScope = (typeof API_TOKEN_SCOPES)[number];

/** A read-only API token as stored: its SHA-256 and a hint, never the token. */
export interface ApiTokenRecord {
  id: string;
  account_id: string;
  name: string;
  hint: string;
  scopes: ApiTokenScope[];
  created_at: string;
  revoked_at: string | null;
}

export interface ConfigStore extends AlertStore {
  migrate(): Promise<void>;
  close(): Promise<void>;

  createAccount(a: { id: string; email: string; password_hash: string }): Promise<Account>;
  getAccountByEmail(email: string): Promise<AccountWithSecret | null>;
  getAccountById(id: string): Promise<AccountWithSecret | null>;
  /** Whether any account exists: a fresh install's console opens on sign-up instead of log-in. */
  hasAccounts(): Promise<boolean>;
  setPassword(accountId: string, passwordHash: string): Promise<void>;
  /** An unknown account has the defaults. */
  getAccountSettings(accountId: string): Promise<AccountSettings>;
  setAccountSettings(accountId: string, settings: AccountSettings): Promise<void>;
  /** The accounts that keep bodies for fewer days than their rows, with that number. */
  bodyRetentions(): Promise<Array<{ account_id: string; days: number }>>;

  /** Inserts a key. `hash` is the SHA-256 hex of the full key; the key itself is never stored. */
  createKey(k: {
    id: string;
    account_id: string;
    /** Defaults to the account's personal organization. */
    org_id?: string;
    /** A service key (KeyRecord.service); false by default. */
    service?: boolean;
    name: string;
    hash: string;
    hint: string;
    expires_at?: string | null;
  }): Promise<KeyRecord>;
  /** Looks a key up by its SHA-256 hex (the proxy's only read, cached in front). */
  getKeyByHash(hash: string): Promise<KeyRecord | null>;
  getKey(id: string): Promise<KeyRecord | null>;
  listKeys(accountId: string): Promise<KeyRecord[]>;
  renameKey(id: string, name: string): Promise<void>;
  /** Sets revoked_at if not already set; returns the key afterwards (null if unknown). */
  revokeKey(id: string, at: string): Promise<KeyRecord | null>;
  /** Sets expires_at (used by roll: the old key expires after the grace period). */
  setKeyExpiry(id: string, expiresAt: string | null): Promise<void>;
  /** Replaces all of a key's limits; returns the key afterwards (null if unknown). */
  setKeyLimits(id: string, limits: KeyLimits): Promise<KeyRecord | null>;
  /** Coalesced write: for each key id, last_used_at = max(existing, given). */
  touchKeys(lastUsed: ReadonlyMap<string, string>): Promise<void>;

  /** The newest key change's seq (0 when none): where a change-feed reader starts. */
  keyChangeHead(): Promise<number>;
  /**
   * Ids of keys changed (revoked, expiry, name, limits, deleted; never last_used_at) after `seq`, and the seq
   * to ask from next. Pages: a reader far behind asks again until seq stops moving. Kept for a day.
   */
  keyChangesSince(seq: number): Promise<KeyChanges>;

  /**
   * Server secrets shared by every instance (e.g. the credential-fingerprint HMAC key): inserts `candidate`
   * under `name` unless one exists, and returns the stored value either way.
   */
  ensureSecret(name: string, candidate: string): Promise<string>;
  /**
   * Removes and returns every entry whose name starts with `prefix` (oldest first): one-shot records such as
   * the notices shown to an account at its next sign-in. Two concurrent callers may both see an entry.
   */
  takeSecrets(prefix: string): Promise<Array<{ name: string; value: string }>>;

  /** An organization with its first owner, in one transaction. */
  createOrg(o: { id: string; name: string; owner_id: string }): Promise<Org>;
  getOrg(id: string): Promise<Org | null>;
  renameOrg(id: string, name: string): Promise<void>;
  /** The organizations an account belongs to, with its role in each (personal first, then by name). */
  listOrgsOf(accountId: string): Promise<Array<Org & { role: OrgRole }>>;
  getRole(orgId: string, accountId: string): Promise<OrgRole | null>;
  listMembers(orgId: string): Promise<Membership[]>;
  /** Inserts or changes a membership. (listMembers: owners, admins, members, viewers; then by joining.) */
  setMember(orgId: string, accountId: string, role: OrgRole): Promise<void>;
  removeMember(orgId: string, accountId: string): Promise<void>;
  /** A member's limits across their keys in the organization; null when they are not a member. */
  getMemberLimits(orgId: string, accountId: string): Promise<MemberLimits | null>;
  /**
   * Replaces a member's limits; null when they are not a member. The member's keys are entered in the key
   * change feed (a trigger), so every instance's key cache reads the new limits.
   */
  setMemberLimits(orgId: string, accountId: string, limits: MemberLimits): Promise<MemberLimits | null>;
  /**
   * Keys of an organization, of one member when accountId is given (service keys are no member's, so then
   * left out); newest first.
   */
  listOrgKeys(orgId: string, accountId?: string): Promise<KeyRecord[]>;
  /** Gives every key `from` holds in the organization to `to` (not service keys); returns their ids. */
  transferKeys(orgId: string, from: string, to: string): Promise<string[]>;
  createInvite(i: {
    id: string;
    org_id: string;
    token_hash: string;
    role: OrgRole;
    created_by: string;
    expires_at: string;
  }): Promise<InviteRecord>;
  getInviteByHash(tokenHash: string): Promise<InviteRecord | null>;
  /** Invites not used and not expired at `now`. */
  listInvites(orgId: string, now: string): Promise<InviteRecord[]>;
  deleteInvite(orgId: string, id: string): Promise<boolean>;
  /** Marks the invite used by accountId if it is unused and unexpired at `at` (one caller wins). */
  claimInvite(tokenHash: string, accountId: string, at: string): Promise<InviteRecord | null>;

  /** Instance settings changed in the console (e.g. the sign-up policy); null when never set. */
  getSetting(name: string): Promise<string | null>;
  setSetting(name: string, value: string): Promise<void>;

  getSsoConnection(orgId: string): Promise<SsoConnection | null>;
  /** The connection whose domains include `domain` (lower case), if any. */
  findSsoConnectionByDomain(domain: string): Promise<SsoConnection | null>;
  /** Inserts or replaces; throws sso_domain_taken when another organization has one of the domains. */
  putSsoConnection(c: Omit<SsoConnection, 'updated_at'>): Promise<SsoConnection>;
  deleteSsoConnection(orgId: string): Promise<boolean>;
  /** Stores a started sign-in; flows past their expiry are dropped on the way. */
  createSsoFlow(f: SsoFlow): Promise<void>;
  /** Removes and returns the flow if it exists and is unexpired at `now`: one caller gets it. */
  takeSsoFlow(idHash: string, now: string): Promise<SsoFlow | null>;

  /** Appends an audit entry; the table refuses updates and deletes (append-only). */
  appendAudit(e: AuditEntry): Promise<void>;
  /** Newest first. */
  listAudit(f: AuditFilter): Promise<AuditEntry[]>;
  /** Days an organization keeps its audit entries; null (also for an unknown one): until dropped by hand. */
  getAuditRetention(orgId: string): Promise<number | null>;
  setAuditRetention(orgId: string, days: number | null): Promise<void>;
  /**
   * Deletes the audit entries older than their organization's retention, measured from the database's
   * clock (the tables' delete triggers refuse any other); returns how many.
   */
  pruneAudit(): Promise<number>;

  /** The labels an account gave the provider credentials it sends, by fingerprint. */
  listCredentialLabels(accountId: string): Promise<CredentialLabel[]>;
  /** Sets (or, with null, removes) the label of one credential fingerprint of an account. */
  setCredentialLabel(accountId: string, fingerprint: string, label: string | null): Promise<void>;

  /** Every provider key link of the install, by provider and key id. */
  listProviderKeyLinks(): Promise<ProviderKeyLink[]>;
  /** Ties (or, with null, unties) a provider's API key id to a credential fingerprint. */
  setProviderKeyLink(provider: string, apiKeyId: string, fingerprint: string | null): Promise<void>;

  /** Inserts a token; `hash` is the SHA-256 hex of the full token, which is never stored. */
  createApiToken(t: Omit<ApiTokenRecord, 'revoked_at'> & { hash: string }): Promise<void>;
  /** An account's tokens, newest first, revoked ones included. */
  listApiTokens(accountId: string): Promise<ApiTokenRecord[]>;
  getApiTokenByHash(hash: string): Promise<ApiTokenRecord | null>;
  /** Sets revoked_at if the token is the account's and not revoked yet; returns whether it is revoked now. */
  revokeApiToken(accountId: string, id: string, at: string): Promise<boolean>;

  createSession(s: SessionRecord): Promise<void>;
  getSession(idHash: string): Promise<SessionRecord | null>;
  touchSession(idHash: string, at: string): Promise<void>;
  deleteSession(idHash: string): Promise<void>;
  deleteSessionsForAccount(accountId: string): Promise<void>;
}

/**
 * Whose rows: an organization's (all its members', or one member's with account_id too), or an account's
 * across organizations (the CLI). Every read is scoped by at least one of the two.
 */
export type RequestScope = { org_id: string; account_id?: string } | { account_id: string; org_id?: string };

export type RequestFilter = RequestScope & {
  key_id?: string;
  /**
   * Rows of these keys are left out: a member's view of an organization leaves out its service keys, whose
   * rows carry the account of the admin who created them (a row needs one) but are no member's.
   */
  exclude_key_ids?: readonly string[];
  provider?: Provider;
  model?: string;
  /** Rows whose model contains this text, in any case (the console's Model filter). */
  model_contains?: string;
  status?: number;
  outcome?: Outcome;
  from?: string; // ISO, inclusive
  to?: string; // ISO, exclusive
  /** Without a value: rows that have the property at all. */
  property?: { name: string; value?: string };
  end_user?: string;
  session?: string;
  connection_id?: string; // a WebSocket's rows: the socket row and its responses
  credential_fingerprint?: string;
  /** Words to find in model, path, end user, session and stored bodies (each store's full-text index). */
  search?: string;
};

/** Summary row for lists: everything but headers and bodies. */
export type RequestSummary = Omit<
  RequestLogRow,
  'request_headers' | 'response_headers' | 'request_body' | 'response_body'
>;

/** What the request list can be ordered by (LogStore.listRequests); time is the rows' id order. */
export const REQUEST_SORT_KEYS = ['time', 'cost', 'tokens', 'latency'] as const;
export interface RequestSort {
  by: (typeof REQUEST_SORT_KEYS)[number];
  dir: 'asc' | 'desc';
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null; // opaque; pass back as `cursor` (with the same sort) for the next page
}

export interface UsagePoint {
  bucket: string; // ISO start of the bucket
  requests: number;
  errors: number; // status >= 400 or outcome != ok
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cost_usd: number; // sum of known costs
  unknown_cost_requests: number; // rows whose cost is null (shown as unknown, never as 0)
  partial_cost_requests: number; // rows whose cost leaves out a fee without a price (in cost_usd: a lower bound)
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
}

/** Rows of one provider, model and price_source whose cost is unknown or partial (`keyrelay prices`). */
export interface PricingGapRow {
  provider: string;
  model: string | null;
  price_source: string;
  requests: number;
}

/**
 * One provider and model's rows in a range, across every account (`keyrelay reconcile`): what keyrelay
 * logged, to set beside the provider's own cost report.
 */
export interface LoggedCostRow {
  provider: string;
  model: string | null;
  requests: number;
  /** The keyed fingerprint of the provider credential the calls used (null: none was sent). */
  credential_fingerprint: string | null;
  input_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  output_tokens: number;
  /** Sum of the known costs: a lower bound where rows are unpriced or partial. */
  cost_usd: number;
  /** Rows whose price_source is `unpriced: …` (a billed call without a cost). */
  unpriced_requests: number;
  /** Rows whose price_source is `partial: …` (a fee without a price left out). */
  partial_requests: number;
}

/** Distinct (provider, model, price_source) groups a pricing-gap query returns at most. */
export const PRICING_GAP_GROUPS = 1000;
/**
 * (provider, model, credential) groups a day's reconciliation reads at most: a real install's day is models
 * times credentials, far fewer; the bound only keeps a pathological day's answer in memory.
 */
export const LOGGED_COST_GROUPS = 50_000;

export interface UsageBreakdownRow extends Omit<UsagePoint, 'bucket'> {
  group: string; // the value grouped by; '' for rows without one
}

/** The columns a usage breakdown can group by. */
export const BREAKDOWN_COLUMNS = [
  'model',
  'key_id',
  'provider',
  'end_user',
  'session',
  'credential_fingerprint',
] as const;

/** What a breakdown's top groups are ranked by (LogStore.usageTop). */
export type BreakdownRank = 'requests' | 'cost' | 'tokens';

/** What a usage breakdown groups by: a column, or one custom property's value. */
export type BreakdownBy = (typeof BREAKDOWN_COLUMNS)[number] | { property: string };

/** The columns a usage series can be split by (LogStore.usageSeriesSplit): who and what spent. */
export const SPLIT_COLUMNS = [
  'end_user',
  'session',
  'credential_fingerprint',
  'model',
  'key_id',
  'provider',
] as const;
export type SplitBy = (typeof SPLIT_COLUMNS)[number];

/** One bucket's sums for one group of a split series; `group` null: every group not named ("other"). */
export interface UsageSplitPoint extends Omit<UsagePoint, 'latency_p50_ms' | 'latency_p95_ms'> {
  group: string | null;
}

/**
 * One session (the rows sharing a `session` value) as the session list shows it, summed over the rows that
 * pass the list's filters.
 */
export interface SessionSummary extends Omit<UsagePoint, 'bucket' | 'latency_p50_ms' | 'latency_p95_ms'> {
  session: string;
  /** The first call's arrival. */
  started_at: string;
  /** The last call's end: the latest arrival + latency of its calls. */
  ended_at: string;
  duration_ms: number;
  /** Distinct models and end users of its calls, sorted; rows without one add nothing. */
  models: string[];
  end_users: string[];
}

/**
 * Body text one insertBatch call carries, at most (characters; a batch holds at least one row): the log
 * queue cuts batches here, and the SQLite writer's heap is sized for it (8 Mi: ~128 rows with 64 KB bodies).
 */
export const LOG_BATCH_BODY_CHARS = 8 * 2 ** 20;

/** What insertBatch did: rows newly stored, and rows refused as malformed (skipped; the rest still stored). */
export interface InsertResult {
  inserted: number;
  rejected: number;
}

/** A key's spend in one UTC hour: `hour` is the hour's start (toISOString), amounts in nanodollars. */
export interface SpendEntry {
  key_id: string;
  hour: string;
  nanos: number;
}

export interface LogStore extends BatchStore {
  migrate(): Promise<void>;
  close(): Promise<void>;

  /**
   * Idempotent on id: a row already present is left as is (counted in neither field). Whole batch in one
   * transaction; a malformed row is skipped and counted as rejected instead of failing the batch. Rejects
   * (throws) only when the database itself fails, so the caller can retry the batch.
   */
  insertBatch(rows: readonly RequestLogRow[]): Promise<InsertResult>;
  /**
   * A page of rows, newest first unless `sort` says otherwise (ties by id; unpriced costs last either way).
   * A search sorted other than newest first needs the full-text index: without it, `invalid_sort`.
   */
  listRequests(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null; sort?: RequestSort },
  ): Promise<Page<RequestSummary>>;
  /** One row in full, only if it is in the scope (a string: an account id). */
  getRequest(scope: string | RequestScope, id: string): Promise<RequestLogRow | null>;
  /** Newest first across all accounts (CLI `requests list` without --email). */
  listRecent(opts: { limit: number; account_id?: string }): Promise<RequestSummary[]>;
  usageSeries(f: RequestFilter, bucket: 'minute' | 'hour' | 'day'): Promise<UsagePoint[]>;
  usageBreakdown(f: RequestFilter, by: BreakdownBy): Promise<UsageBreakdownRow[]>;
  /**
   * The first `limit` groups of usageBreakdown by `rank` (ties in its order: most requests, then by group),
   * and how many groups there are: ranked where the rows are read, so only those cross to the caller (and
   * from the usage rollup, only their percentiles are computed).
   */
  usageTop(
    f: RequestFilter,
    by: BreakdownBy,
    rank: BreakdownRank,
    limit: number,
  ): Promise<{ rows: UsageBreakdownRow[]; total_groups: number }>;
  /**
   * The series split by a column: each bucket's sums for each of `groups` (rows without the value count as
   * '') and one null group for every other value. No percentiles: a split chart shows sums.
   */
  usageSeriesSplit(
    f: RequestFilter,
    bucket: 'minute' | 'hour' | 'day',
    by: SplitBy,
    groups: readonly string[],
  ): Promise<UsageSplitPoint[]>;
  /**
   * A page of sessions: the rows with a session that pass the filter, grouped by session, newest first by
   * their first row (keyset on it: a row written meanwhile never makes a page repeat or skip a session).
   */
  listSessions(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<SessionSummary>>;
  /**
   * One session's rows in the scope (less the excluded keys' rows), oldest first, a page at a time (the
   * cursor: the last row's id).
   */
  sessionCalls(
    scope: RequestScope & Pick<RequestFilter, 'exclude_key_ids'>,
    session: string,
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<RequestSummary>>;
  /**
   * Across every account, rows created in [from, to) whose price_source is `unpriced: …` or `partial: …`,
   * counted by provider, model and price_source; most requests first, at most PRICING_GAP_GROUPS.
   */
  pricingGaps(from: string, to: string): Promise<PricingGapRow[]>;
  /**
   * Across every account, rows created in [from, to) of the given providers, summed by provider, model and credential fingerprint;
   * most cost first, at most LOGGED_COST_GROUPS groups.
   */
  loggedCosts(from: string, to: string, providers: readonly string[]): Promise<LoggedCostRow[]>;
  /**
   * Deletes rows created before `before` (none when it is the epoch); drops the bodies of each account's rows
   * created before its cutoff in `bodies`.
   */
  prune(before: string, bodies?: readonly BodyCutoff[]): Promise<{ deleted: number }>;
  count(): Promise<number>;
  /**
   * Budget spend since `since` (a period's start, on the hour), in USD: the known cost_usd of a key's rows
   * created at or after it, plus what addSpend recorded in the hours starting at or after it. With `endUser`,
   * only that end user's rows of the key (hourly spend is per key, so none of it).
   */
  spendSince(keyId: string, since: string, endUser?: string): Promise<number>;
  /**
   * Adds to keys' hourly spend: what budgets read where no row is written (the request log off), so that a
   * restart still knows what a key spent. One entry per key and hour in a call; added to what is there.
   */
  addSpend(entries: readonly SpendEntry[]): Promise<void>;
  /**
   * Adds the newest day of rows the usage rollup does not hold yet (rows logged before it existed, or what
   * retention left of a day); false when none is left. Run in the background after start until it is.
   */
  fillUsageRollup(): Promise<boolean>;
}

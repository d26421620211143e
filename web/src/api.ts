/**
 * The console's only way to talk to the server: the JSON API in docs/console-api.md. Session is the
 * HttpOnly cookie, so every call is same-origin with credentials; state changes send JSON so the server's
 * CSRF check (content-type + Origin) passes.
 */
import type { SignupNotice } from '../../src/accounts/sign-up.js';
import type { CostBreakdown, Provider, Outcome, RequestLogRow } from '../../src/types.js';
import type { BatchRecord } from '../../src/store/batch-types.js';
import type { Reconciliation } from '../../src/reconcile/index.js';
import type { AlertDelivery, AlertRule } from '../../src/store/alert-types.js';
import type {
  Account,
  AccountSettings,
  KeyBudgetStatus,
  KeyRateStatus,
  RateHeadroom,
  AuditEntry,
  KeyLimits,
  KeyView,
  Membership,
  MemberLimits,
  OrgRole,
  Page,
  RequestSort,
  RequestSummary,
  SessionSummary,
  SplitBy,
  UsageBreakdownRow,
  UsagePoint,
  UsageSplitPoint,
} from '../../src/store/types.js';

export type {
  Account,
  AlertDelivery,
  AlertRule,
  AccountSettings,
  BatchRecord,
  CostBreakdown,
  KeyBudgetStatus,
  KeyLimits,
  KeyRateStatus,
  KeyView,
  Provider,
  RateHeadroom,
  Outcome,
  RequestLogRow,
  RequestSort,
  RequestSummary,
  SessionSummary,
  SignupNotice,
  SplitBy,
  UsageBreakdownRow,
  UsagePoint,
  UsageSplitPoint,
};
export type CreatedKey = KeyView & { key: string };
export type { Reconciliation };
export type { Membership, MemberLimits, OrgRole };
/** A member's limits across their keys, and their budget's spend this period (null without a budget). */
export interface MemberLimitsView {
  limits: MemberLimits;
  budget: KeyBudgetStatus | null;
}
export interface OrgView {
  id: string;
  name: string;
  personal: boolean;
  created_at: string;
  role: OrgRole;
}
/** An organization's single sign-on, as the API shows it: never the client secret. */
export interface SsoView {
  issuer: string;
  client_id: string;
  client_secret_set: boolean;
  domains: string[];
  default_role: Exclude<OrgRole, 'owner'>;
  sso_only: boolean;
  updated_at: string;
}
export interface SsoInput {
  issuer: string;
  client_id: string;
  client_secret?: string;
  domains: string[];
  default_role: Exclude<OrgRole, 'owner'>;
  sso_only: boolean;
}
export interface SignupPolicy {
  /** KEYRELAY_SIGNUP: the bound the console cannot loosen. */
  configured: SignupMode;
  chosen: SignupMode | null;
  effective: SignupMode;
  /** Only the install's owner (its first account) may change it. */
  can_change: boolean;
}
export interface AuditQuery {
  action?: string;
  actor?: string;
  from?: string;
  to?: string;
  cursor?: string | null;
  limit?: number;
}
export type { AuditEntry };
export interface InviteView {
  id: string;
  role: OrgRole;
  created_by: string;
  created_at: string;
  expires_at: string;
}
export type SignupMode = 'open' | 'invite' | 'closed';

export interface Info {
  signup: SignupMode;
  /** The password rule the server enforces; the forms say and check the same. */
  password: { min_length: number; max_length: number };
  /** No account exists yet: the console opens on sign-up. */
  fresh_install: boolean;
  public_url: string;
  providers: { openai: { base_url: string }; anthropic: { base_url: string } };
  /** Providers this deployment adds (KEYRELAY_UPSTREAMS), named as their route. */
  upstreams: { name: string; shape: 'openai' | 'anthropic'; base_url: string }[];
}

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Seconds from the server's retry-after header, when it sent one. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

type Listener = () => void;
let onUnauthenticated: Listener = () => {};

/** The app registers one handler: a 401 from any session-bound call sends the person to the login page. */
export function setUnauthenticatedHandler(fn: Listener): void {
  onUnauthenticated = fn;
}

type Query = Record<string, string | number | undefined | null>;

function buildPath(path: string, query?: Query): string {
  if (!query) return path;
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query))
    if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

/** The organization keys, requests and usage are read in (the switcher's pick; the personal one if none). */
const ORG_STORAGE = 'keyrelay.org';
export function currentOrg(): string | null {
  return window.localStorage.getItem(ORG_STORAGE);
}
export function setCurrentOrg(id: string | null): void {
  if (id) window.localStorage.setItem(ORG_STORAGE, id);
  else window.localStorage.removeItem(ORG_STORAGE);
}
/** An invitation the person is signing up or in for, kept across that detour (never in the address). */
export const INVITE_STORAGE = 'keyrelay.invite';

async function call<T>(method: string, path: string, body?: unknown, query?: Query): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const org = currentOrg();
  if (org) headers['x-keyrelay-org'] = org;
  const init: RequestInit = { method, credentials: 'same-origin', headers };
  if (method !== 'GET') {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body ?? {});
  }
  let res: Response;
  try {
    res = await fetch(buildPath(`/api/console${path}`, query), init);
  } catch {
    throw new ApiError(0, 'network_error', 'Could not reach keyrelay. Check your connection and try again.');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // A proxy or crash page in front of us: fall through to a generic error below.
  }
  if (!res.ok) {
    const err = (json as { error?: { code?: string; message?: string } } | null)?.error;
    const retryAfter = Number(res.headers.get('retry-after') ?? NaN);
    const apiErr = new ApiError(
      res.status,
      err?.code ?? 'http_error',
      err?.message ?? `Request failed (${res.status}).`,
      Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
    );
    // Login's own 401 means "wrong password", not "session gone".
    if (res.status === 401 && path !== '/login') onUnauthenticated();
    throw apiErr;
  }
  return json as T;
}

export interface RequestQuery {
  key_id?: string;
  provider?: string;
  model?: string;
  status?: string;
  outcome?: string;
  from?: string;
  to?: string;
  property?: string;
  connection_id?: string;
  end_user?: string;
  session?: string;
  /** Full-text search over model, path, end user, session and stored bodies. */
  q?: string;
  limit?: number;
  cursor?: string | null;
  /** `time|cost|tokens|latency:asc|desc`; newest first when absent. */
  sort?: string;
}

/** A read-only API token as listed (the token itself is shown once, at creation). */
export interface ApiTokenView {
  id: string;
  name: string;
  hint: string;
  scopes: string[];
  created_at: string;
  revoked_at: string | null;
}

/** A provider credential by its keyed fingerprint (never the credential), over a range. */
export interface CredentialView {
  fingerprint: string;
  label: string | null;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  unknown_cost_requests: number;
  /** The rate limits the provider reported on the credential's latest response that had any. */
  headroom: {
    seen_at: string;
    provider: string;
    limits: { name: string; limit: number | null; remaining: number | null; reset: string | null }[];
  } | null;
}

export type BreakdownBy =
  'model' | 'key_id' | 'provider' | 'end_user' | 'session' | 'credential_fingerprint' | `property:${string}`;

export interface UsageQuery {
  from: string;
  to: string;
  key_id?: string;
  provider?: string;
  model?: string;
  end_user?: string;
}

export const api = {
  info: () => call<Info>('GET', '/info'),
  me: () => call<{ account: Account }>('GET', '/me'),
  signup: (email: string, password: string) =>
    call<{ next: 'login' }>('POST', '/signup', {
      email,
      password,
      invite: window.sessionStorage.getItem(INVITE_STORAGE) ?? undefined,
    }),
  login: (email: string, password: string) =>
    call<{ account: Account; key: CreatedKey | null; notices: SignupNotice[] }>('POST', '/login', {
      email,
      password,
    }),
  logout: () => call<void>('POST', '/logout', {}),
  changePassword: (current_password: string, new_password: string) =>
    call<void>('POST', '/password', { current_password, new_password }),

  getSettings: () => call<{ settings: AccountSettings }>('GET', '/settings'),
  saveSettings: (settings: AccountSettings) =>
    call<{ settings: AccountSettings }>('PUT', '/settings', settings),

  listKeys: () =>
    call<{
      keys: KeyView[];
      budgets: Record<string, KeyBudgetStatus>;
      /** Absent from a console without a proxy. */
      rates?: Record<string, KeyRateStatus>;
      /** The caller's own limits across their keys here, when an admin set any. */
      member?: MemberLimitsView | null;
    }>('GET', '/keys'),
  createKey: (name: string, limits: Partial<KeyLimits> = {}, service = false) =>
    call<{ key: CreatedKey }>('POST', '/keys', { name, ...limits, ...(service ? { service } : {}) }),
  renameKey: (id: string, name: string) =>
    call<{ key: KeyView }>('PATCH', `/keys/${encodeURIComponent(id)}`, { name }),
  /** Only the fields given change; null removes that limit. */
  updateKeyLimits: (id: string, limits: Partial<KeyLimits>) =>
    call<{ key: KeyView }>('PATCH', `/keys/${encodeURIComponent(id)}`, limits),
  rollKey: (id: string, grace_seconds: number) =>
    call<{ key: CreatedKey; old: KeyView }>('POST', `/keys/${encodeURIComponent(id)}/roll`, {
      grace_seconds,
    }),
  revokeKey: (id: string) => call<{ key: KeyView }>('POST', `/keys/${encodeURIComponent(id)}/revoke`, {}),

  /** Where the filtered log downloads as a file (a plain link: the browser streams it to disk). */
  exportUrl: (q: Omit<RequestQuery, 'limit' | 'cursor' | 'sort'>, format: 'csv' | 'ndjson') =>
    buildPath('/api/console/requests/export', { ...q, format }),
  listRequests: (q: RequestQuery) => call<Page<RequestSummary>>('GET', '/requests', undefined, { ...q }),
  getRequest: (id: string) =>
    call<{ request: RequestLogRow; cost_breakdown: CostBreakdown | null }>(
      'GET',
      `/requests/${encodeURIComponent(id)}`,
    ),
  usageSeries: (q: UsageQuery & { bucket: 'minute' | 'hour' | 'day' }) =>
    call<{ points: UsagePoint[] }>('GET', '/usage/series', undefined, { ...q }),
  /** `by`: a column, or `property:<name>` for one custom property's values. */
  usageBreakdown: (
    q: UsageQuery & { by: BreakdownBy; rank?: 'requests' | 'cost' | 'tokens'; limit?: number },
  ) =>
    call<{ rows: UsageBreakdownRow[]; total_groups: number }>('GET', '/usage/breakdown', undefined, {
      ...q,
    }),
  /** Each bucket's sums for the top `top` groups of `split_by` (by `rank`), and the rest as group null. */
  usageSeriesSplit: (
    q: UsageQuery & {
      bucket: 'minute' | 'hour' | 'day';
      split_by: SplitBy;
      top?: number;
      rank?: 'requests' | 'cost' | 'tokens';
      end_user?: string;
    },
  ) =>
    call<{ groups: UsageBreakdownRow[]; total_groups: number; points: UsageSplitPoint[] }>(
      'GET',
      '/usage/series/split',
      undefined,
      { ...q },
    ),
  listSessions: (q: UsageQuery & { end_user?: string; limit?: number; cursor?: string }) =>
    call<Page<SessionSummary>>('GET', '/sessions', undefined, { ...q }),
  getSession: (session: string, cursor?: string) =>
    call<{ session: SessionSummary; calls: RequestSummary[]; next_cursor: string | null }>(
      'GET',
      '/sessions/detail',
      undefined,
      { session, cursor },
    ),
  listCredentials: (q: { from?: string; to?: string }) =>
    call<{ from: string; to: string; credentials: CredentialView[] }>('GET', '/credentials', undefined, {
      ...q,
    }),
  setCredentialLabel: (fingerprint: string, label: string | null) =>
    call<{ fingerprint: string; label: string | null }>(
      'PUT',
      `/credentials/${encodeURIComponent(fingerprint)}/label`,
      { label },
    ),
  listApiTokens: () => call<{ tokens: ApiTokenView[] }>('GET', '/api-tokens'),
  createApiToken: (name: string, scopes: string[]) =>
    call<{ token: ApiTokenView; secret: string }>('POST', '/api-tokens', { name, scopes }),
  revokeApiToken: (id: string) =>
    call<{ token: ApiTokenView }>('POST', `/api-tokens/${encodeURIComponent(id)}/revoke`, {}),
  listBatches: () => call<{ batches: BatchRecord[] }>('GET', '/batches'),

  listOrgs: () => call<{ orgs: OrgView[] }>('GET', '/orgs'),
  createOrg: (name: string) => call<{ org: OrgView }>('POST', '/orgs', { name }),
  listMembers: (org: string) =>
    call<{ members: Membership[] }>('GET', `/orgs/${encodeURIComponent(org)}/members`),
  setMemberRole: (org: string, account: string, role: OrgRole) =>
    call<{ member: Membership }>(
      'PATCH',
      `/orgs/${encodeURIComponent(org)}/members/${encodeURIComponent(account)}`,
      { role },
    ),
  getMemberLimits: (org: string, account: string) =>
    call<MemberLimitsView>(
      'GET',
      `/orgs/${encodeURIComponent(org)}/members/${encodeURIComponent(account)}/limits`,
    ),
  /** Only the fields given change; null removes that limit. */
  setMemberLimits: (org: string, account: string, limits: Partial<MemberLimits>) =>
    call<MemberLimitsView>(
      'PATCH',
      `/orgs/${encodeURIComponent(org)}/members/${encodeURIComponent(account)}/limits`,
      limits,
    ),
  removeMember: (org: string, account: string, transfer_to?: string) =>
    call<{ revoked: string[]; transferred: string[] }>(
      'POST',
      `/orgs/${encodeURIComponent(org)}/members/${encodeURIComponent(account)}/remove`,
      { transfer_to },
    ),
  listInvites: (org: string) =>
    call<{ invites: InviteView[] }>('GET', `/orgs/${encodeURIComponent(org)}/invites`),
  createInvite: (org: string, role: OrgRole) =>
    call<{ invite: InviteView; token: string }>('POST', `/orgs/${encodeURIComponent(org)}/invites`, { role }),
  revokeInvite: (org: string, id: string) =>
    call<void>('POST', `/orgs/${encodeURIComponent(org)}/invites/${encodeURIComponent(id)}/revoke`, {}),
  listAudit: (org: string, q: AuditQuery) =>
    call<{ entries: AuditEntry[]; next_cursor: string | null }>(
      'GET',
      `/orgs/${encodeURIComponent(org)}/audit`,
      undefined,
      { ...q },
    ),
  getSso: (org: string) =>
    call<{ sso: SsoView | null; redirect_uri: string }>('GET', `/orgs/${encodeURIComponent(org)}/sso`),
  putSso: (org: string, body: SsoInput) =>
    call<{ sso: SsoView; redirect_uri: string }>('PUT', `/orgs/${encodeURIComponent(org)}/sso`, body),
  deleteSso: (org: string) => call<void>('DELETE', `/orgs/${encodeURIComponent(org)}/sso`, {}),
  startSso: (email: string) => call<{ url: string; email: string }>('POST', '/sso/start', { email }),
  auditRetention: (org: string) =>
    call<{ retention_days: number | null }>('GET', `/orgs/${encodeURIComponent(org)}/audit/retention`),
  setAuditRetention: (org: string, retention_days: number | null) =>
    call<{ retention_days: number | null }>('PUT', `/orgs/${encodeURIComponent(org)}/audit/retention`, {
      retention_days,
    }),
  listAlertRules: (org: string) =>
    call<{ rules: AlertRule[] }>('GET', `/orgs/${encodeURIComponent(org)}/alerts`),
  createAlertRule: (org: string, rule: Record<string, unknown>) =>
    call<AlertRule>('POST', `/orgs/${encodeURIComponent(org)}/alerts`, rule),
  setAlertRuleEnabled: (org: string, id: string, enabled: boolean) =>
    call<AlertRule>('PATCH', `/orgs/${encodeURIComponent(org)}/alerts/${encodeURIComponent(id)}`, {
      enabled,
    }),
  deleteAlertRule: (org: string, id: string) =>
    call<void>('DELETE', `/orgs/${encodeURIComponent(org)}/alerts/${encodeURIComponent(id)}`),
  listAlertDeliveries: (org: string) =>
    call<{ deliveries: AlertDelivery[] }>('GET', `/orgs/${encodeURIComponent(org)}/alert-deliveries`),
  signupPolicy: () => call<SignupPolicy>('GET', '/settings/signup'),
  reconcile: (day: string) => call<Reconciliation>('GET', '/reconcile', undefined, { day }),
  linkProviderKey: (provider: string, apiKeyId: string, fingerprint: string) =>
    call<{ provider: string; api_key_id: string; fingerprint: string }>(
      'PUT',
      `/reconcile/links/${encodeURIComponent(provider)}/${encodeURIComponent(apiKeyId)}`,
      { fingerprint },
    ),
  unlinkProviderKey: (provider: string, apiKeyId: string) =>
    call<void>(
      'DELETE',
      `/reconcile/links/${encodeURIComponent(provider)}/${encodeURIComponent(apiKeyId)}`,
      {},
    ),
  setSignupPolicy: (mode: SignupMode) => call<SignupPolicy>('POST', '/settings/signup', { mode }),
  previewInvite: (token: string) =>
    call<{ org: { name: string }; role: OrgRole; expires_at: string }>('POST', '/invites/preview', { token }),
  acceptInvite: (token: string) =>
    call<{ org: OrgView; key: CreatedKey | null }>('POST', '/invites/accept', { token }),
};

/**
 * The console's only way to talk to the server: the JSON API in docs/console-api.md. Session is the
 * HttpOnly cookie, so every call is same-origin with credentials; state changes send JSON so the server's
 * CSRF check (content-type + Origin) passes.
 */
import type { SignupNotice } from '../../src/accounts/sign-up.js';
import type { Provider, Outcome, RequestLogRow } from '../../src/types.js';
import type { BatchRecord } from '../../src/store/batch-types.js';
import type {
  Account,
  KeyLimits,
  KeyView,
  Page,
  RequestSummary,
  UsageBreakdownRow,
  UsagePoint,
} from '../../src/store/types.js';

export type {
  Account,
  BatchRecord,
  KeyLimits,
  KeyView,
  Provider,
  Outcome,
  RequestLogRow,
  RequestSummary,
  SignupNotice,
  UsageBreakdownRow,
  UsagePoint,
};
export type CreatedKey = KeyView & { key: string };
export type SignupMode = 'open' | 'invite' | 'closed';

export interface Info {
  signup: SignupMode;
  /** The password rule the server enforces; the forms say and check the same. */
  password: { min_length: number; max_length: number };
  /** No account exists yet: the console opens on sign-up. */
  fresh_install: boolean;
  public_url: string;
  providers: { openai: { base_url: string }; anthropic: { base_url: string } };
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

async function call<T>(method: string, path: string, body?: unknown, query?: Query): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
  if (method !== 'GET') {
    init.headers = { accept: 'application/json', 'content-type': 'application/json' };
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
  /** Full-text search over model, path, end user, session and stored bodies. */
  q?: string;
  limit?: number;
  cursor?: string | null;
}

export interface UsageQuery {
  from: string;
  to: string;
  key_id?: string;
  provider?: string;
  model?: string;
}

export const api = {
  info: () => call<Info>('GET', '/info'),
  me: () => call<{ account: Account }>('GET', '/me'),
  signup: (email: string, password: string) =>
    call<{ next: 'login' }>('POST', '/signup', { email, password }),
  login: (email: string, password: string) =>
    call<{ account: Account; key: CreatedKey | null; notices: SignupNotice[] }>('POST', '/login', {
      email,
      password,
    }),
  logout: () => call<void>('POST', '/logout', {}),
  changePassword: (current_password: string, new_password: string) =>
    call<void>('POST', '/password', { current_password, new_password }),

  listKeys: () => call<{ keys: KeyView[] }>('GET', '/keys'),
  createKey: (name: string, limits: Partial<KeyLimits> = {}) =>
    call<{ key: CreatedKey }>('POST', '/keys', { name, ...limits }),
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

  listRequests: (q: RequestQuery) => call<Page<RequestSummary>>('GET', '/requests', undefined, { ...q }),
  getRequest: (id: string) => call<{ request: RequestLogRow }>('GET', `/requests/${encodeURIComponent(id)}`),
  usageSeries: (q: UsageQuery & { bucket: 'minute' | 'hour' | 'day' }) =>
    call<{ points: UsagePoint[] }>('GET', '/usage/series', undefined, { ...q }),
  usageBreakdown: (q: UsageQuery & { by: 'model' | 'key_id' | 'provider' }) =>
    call<{ rows: UsageBreakdownRow[] }>('GET', '/usage/breakdown', undefined, { ...q }),
  listBatches: () => call<{ batches: BatchRecord[] }>('GET', '/batches'),
};

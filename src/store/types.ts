/**
 * Storage interfaces. Two stores, as in bifrost: a small config store (accounts, keys, sessions) and a
 * high-volume log store. Each has a SQLite and a PostgreSQL implementation; only src/store/factory.ts
 * imports a concrete one. test/store-contract.test.ts runs every method on both.
 */
import type { Outcome, Provider, RequestLogRow } from '../types.js';
import type { BatchStore } from './batch-types.js';

export interface Account {
  id: string;
  email: string; // lower-cased
  created_at: string;
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
}

export interface KeyRecord extends KeyLimits {
  id: string;
  name: string;
  account_id: string;
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

/** A page of the key change feed (ConfigStore.keyChangesSince). */
export interface KeyChanges {
  seq: number;
  keyIds: string[];
}

export interface SessionRecord {
  id_hash: string; // SHA-256 of the session token; the token itself lives only in the cookie
  account_id: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string; // absolute expiry
}

export interface ConfigStore {
  migrate(): Promise<void>;
  close(): Promise<void>;

  createAccount(a: { id: string; email: string; password_hash: string }): Promise<Account>;
  getAccountByEmail(email: string): Promise<AccountWithSecret | null>;
  getAccountById(id: string): Promise<AccountWithSecret | null>;
  /** Whether any account exists: a fresh install's console opens on sign-up instead of log-in. */
  hasAccounts(): Promise<boolean>;
  setPassword(accountId: string, passwordHash: string): Promise<void>;

  /** Inserts a key. `hash` is the SHA-256 hex of the full key; the key itself is never stored. */
  createKey(k: {
    id: string;
    account_id: string;
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

  createSession(s: SessionRecord): Promise<void>;
  getSession(idHash: string): Promise<SessionRecord | null>;
  touchSession(idHash: string, at: string): Promise<void>;
  deleteSession(idHash: string): Promise<void>;
  deleteSessionsForAccount(accountId: string): Promise<void>;
}

export interface RequestFilter {
  account_id: string; // always scoped: an account only ever sees its own rows
  key_id?: string;
  provider?: Provider;
  model?: string;
  status?: number;
  outcome?: Outcome;
  from?: string; // ISO, inclusive
  to?: string; // ISO, exclusive
  property?: { name: string; value: string };
  end_user?: string;
  session?: string;
  connection_id?: string; // a WebSocket's rows: the socket row and its responses
  /** Words to find in model, path, end user, session and stored bodies (each store's full-text index). */
  search?: string;
}

/** Summary row for lists: everything but headers and bodies. */
export type RequestSummary = Omit<
  RequestLogRow,
  'request_headers' | 'response_headers' | 'request_body' | 'response_body'
>;

export interface Page<T> {
  items: T[];
  next_cursor: string | null; // opaque; pass back as `cursor` for the next (older) page
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
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
}

export interface UsageBreakdownRow extends Omit<UsagePoint, 'bucket'> {
  group: string; // model, key_id or provider
}

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
  listRequests(
    f: RequestFilter,
    opts: { limit: number; cursor?: string | null },
  ): Promise<Page<RequestSummary>>;
  /** One row in full, only if it belongs to accountId. */
  getRequest(accountId: string, id: string): Promise<RequestLogRow | null>;
  /** Newest first across all accounts (CLI `requests list` without --email). */
  listRecent(opts: { limit: number; account_id?: string }): Promise<RequestSummary[]>;
  usageSeries(f: RequestFilter, bucket: 'minute' | 'hour' | 'day'): Promise<UsagePoint[]>;
  usageBreakdown(f: RequestFilter, by: 'model' | 'key_id' | 'provider'): Promise<UsageBreakdownRow[]>;
  /** Deletes rows created before `before`; drops bodies of rows created before `bodiesBefore`. */
  prune(before: string, bodiesBefore?: string): Promise<{ deleted: number }>;
  count(): Promise<number>;
  /**
   * Budget spend since `since` (a period's start, on the hour), in USD: the known cost_usd of a key's rows
   * created at or after it, plus what addSpend recorded in the hours starting at or after it.
   */
  spendSince(keyId: string, since: string): Promise<number>;
  /**
   * Adds to keys' hourly spend: what budgets read where no row is written (the request log off), so that a
   * restart still knows what a key spent. One entry per key and hour in a call; added to what is there.
   */
  addSpend(entries: readonly SpendEntry[]): Promise<void>;
}

/**
 * Per-key controls on the proxy's hot path (docs/limits.md): allowed providers and models, requests and tokens
 * per minute, requests in flight, and a spend budget per UTC day or month, soft or hard. `admit` touches
 * only memory, except where a hold must be shared (a hard budget or an in-flight limit with Redis: one
 * round trip), or a hard budget's spend is not loaded yet; keys without limits return after six comparisons.
 * The limits come from the KeyRecord the key cache hands the proxy, so a changed limit applies as soon as
 * the key event evicts the cached record. An admitted request that holds something (a reservation, a slot,
 * counted tokens) gets a Hold, which `settle` releases with the request's log row, whatever its ending.
 *
 * With shared counters (Redis), a background sync every `syncMs` adds this instance's counts to the shared
 * totals and reads back every instance's: the limits then hold across instances, give or take what the
 * other instances admit within one sync interval. Without them, each instance enforces on its own counts.
 * A sync that fails (Redis down) keeps its counts for the next one; meanwhile enforcement is per instance.
 */
import { randomBytes } from 'node:crypto';
import { ProxyError } from '../errors.js';
import type { Provider, RequestLogRow } from '../types.js';
import type { KeyRecord, LogStore } from '../store/types.js';
import type { RequestInfo } from '../usage/types.js';
import { isRequestAllowed } from './access.js';
import { isRpmExempt, requestBound, requestClass, type RequestBound } from './bound.js';
import { MINUTE_MS, secondsUntil } from './periods.js';
import { RateCounters } from './rate.js';
import type { SharedCounters } from './redis-counters.js';
import type { SharedHolds } from './redis-holds.js';
import { SpendLedger, toNanos, type SpendState } from './spend.js';

/** What an admitted request holds until it is settled. */
export interface Hold {
  readonly id: string;
  readonly keyId: string;
  /** Tokens counted against the tokens-per-minute limit at admission, and the window they went into. */
  tokens: number;
  window: number;
  tpm: boolean;
  /** Hard budget: nanodollars reserved, and the period they were reserved in. */
  nanos: number;
  spend: SpendState | null;
  /** Holds an in-flight slot (in this instance's count, or in Redis when shared). */
  slot: boolean;
  /** Taken in Redis (reservation and slot): released there by settle. */
  shared: boolean;
  settled: boolean;
}

/** A refusal, a hold to settle when the request ends, or null (nothing held). */
export type Admission = ProxyError | Hold | null;

export interface Limits {
  /** The refusal for this request, or null to let it through (and count it against the rate limit). */
  check(key: KeyRecord, provider: Provider, model: string | null, method?: string): ProxyError | null;
  /**
   * Admission of a request whose body is parsed: every limit, and the holds it takes. Synchronous unless
   * a hold must go through Redis or wait for the key's spend to load.
   */
  admit(
    key: KeyRecord,
    provider: Provider,
    info: RequestInfo,
    method: string,
  ): Admission | Promise<Admission>;
  /**
   * A request's end, any ending: releases its hold (null: none) and counts its row's cost and tokens. A
   * null row releases the hold at no cost (a request that never went upstream and has no row).
   */
  settle(hold: Hold | null, row: RequestLogRow | null): void;
  /** A finished request's log row without a hold: its cost counts against the key's budget. */
  record(row: RequestLogRow): void;
}

export interface LimiterOptions {
  spendSince: LogStore['spendSince'];
  shared?: SharedCounters | null;
  /** Shared reservations and in-flight slots (Redis); null: this instance's own. */
  holds?: SharedHolds | null;
  syncMs?: number;
  now?: () => number;
  onError?: (err: unknown, msg: string) => void;
  /** Output tokens reserved for a request that names no maximum (KEYRELAY_BUDGET_DEFAULT_OUTPUT_TOKENS). */
  defaultOutputTokens?: number;
  /** Unpriced calls under a hard budget: refused, or admitted at a cost of 0 (KEYRELAY_HARD_BUDGET_UNPRICED). */
  unpriced?: 'refuse' | 'allow';
  /** How long a shared hold outlives its instance's last refresh (KEYRELAY_LIMIT_HOLD_TTL_MS). */
  holdTtlMs?: number;
}

export const DEFAULT_SYNC_MS = 200;
export const DEFAULT_OUTPUT_TOKENS = 4096;
export const DEFAULT_HOLD_TTL_MS = 60_000;
/** Hold ids: unique per instance by a random prefix, cheaper than a UUID per request. */
const HOLD_PREFIX = `${randomBytes(6).toString('base64url')}.`;
let holdSeq = 0;
/** Retry-after for a refusal that ends when requests in flight end, not with a window or a period. */
const IN_FLIGHT_RETRY_S = 1;
const SWEEP_MS = 30_000;
const MAX_SHOWN_MODEL = 100;

export class KeyLimiter implements Limits {
  private readonly rate: RateCounters;
  private readonly tpm: RateCounters;
  private readonly spend: SpendLedger;
  private readonly shared: SharedCounters | null;
  private readonly holds: SharedHolds | null;
  private readonly defaultOutputTokens: number;
  private readonly unpriced: 'refuse' | 'allow';
  private readonly holdTtlMs: number;
  /** In-flight slots held here, per key (local enforcement, and the fallback when Redis fails). */
  private readonly inflight = new Map<string, number>();
  /** Shared holds still running here, per key: their expiry is pushed forward while they run. */
  private readonly running = new Map<string, Set<string>>();
  private lastRefresh = 0;
  private holdsFailing = false;
  private readonly now: () => number;
  private readonly onError: (err: unknown, msg: string) => void;
  private readonly timer: NodeJS.Timeout;
  private syncing: Promise<void> | null = null;
  private lastSweep = 0;
  private syncFailing = false;

  constructor(opts: LimiterOptions) {
    this.shared = opts.shared ?? null;
    this.now = opts.now ?? Date.now;
    this.onError = opts.onError ?? (() => {});
    this.holds = opts.holds ?? null;
    this.defaultOutputTokens = opts.defaultOutputTokens ?? DEFAULT_OUTPUT_TOKENS;
    this.unpriced = opts.unpriced ?? 'refuse';
    this.holdTtlMs = opts.holdTtlMs ?? DEFAULT_HOLD_TTL_MS;
    this.rate = new RateCounters(this.shared !== null);
    this.tpm = new RateCounters(this.shared !== null);
    this.spend = new SpendLedger(opts.spendSince, (err) =>
      this.onError(err, 'budget spend could not be loaded; retrying'),
    );
    this.timer = setInterval(() => void this.sync(), opts.syncMs ?? DEFAULT_SYNC_MS);
    this.timer.unref();
  }

  check(key: KeyRecord, provider: Provider, model: string | null, method?: string): ProxyError | null {
    if (
      key.allowed_providers == null &&
      key.allowed_models == null &&
      key.rate_limit_rpm == null &&
      key.budget_usd == null
    ) {
      return null;
    }
    if (!isRequestAllowed(key, provider, model, method)) return forbidden(key, provider, model);
    const now = this.now();
    if (key.budget_usd != null) {
      const period = key.budget_period ?? 'month';
      const wait = this.spend.exceeded(key.id, key.budget_usd, period, now);
      if (wait !== null) return budgetRefusal(key, period, wait);
    }
    if (key.rate_limit_rpm != null && (key.rate_limit_scope === 'all' || !isRpmExempt(method ?? 'GET', ''))) {
      const wait = this.rate.admit(key.id, key.rate_limit_rpm, now);
      if (wait !== null) {
        return new ProxyError(
          'proxy_rate_limited',
          `Limit: ${key.rate_limit_rpm} requests per minute.`,
          wait,
        );
      }
    }
    return null;
  }

  record(row: RequestLogRow): void {
    if (row.cost_usd !== null && row.cost_usd > 0) this.spend.add(row.key_id, row.created_at, row.cost_usd);
  }

  admit(
    key: KeyRecord,
    provider: Provider,
    info: RequestInfo,
    method: string,
  ): Admission | Promise<Admission> {
    if (
      key.allowed_providers == null &&
      key.allowed_models == null &&
      key.rate_limit_rpm == null &&
      key.budget_usd == null &&
      key.rate_limit_tpm == null &&
      key.max_concurrent == null
    ) {
      return null;
    }
    if (!isRequestAllowed(key, provider, info.model, method)) return forbidden(key, provider, info.model);
    const now = this.now();
    const path = info.path;
    const hard = key.budget_usd != null && key.budget_mode === 'hard';
    const priced = hard || key.rate_limit_tpm != null;
    const cls = priced ? requestClass(provider, method, path) : null;
    let spend: SpendState | null = null;
    if (key.budget_usd != null) {
      const period = key.budget_period ?? 'month';
      if (!hard) {
        const wait = this.spend.exceeded(key.id, key.budget_usd, period, now);
        if (wait !== null) return budgetRefusal(key, period, wait);
      } else {
        spend = this.spend.state(key.id, period, now);
        if (spend.status === 'loaded' && spend.total >= toNanos(key.budget_usd))
          return budgetRefusal(key, period, secondsUntil(spend.end, now));
      }
    }
    const bound: RequestBound | null =
      cls === 'tokens' ? requestBound(provider, path, info.model, info.json, this.defaultOutputTokens) : null;
    let nanos = 0;
    if (hard && cls !== 'free') {
      if (bound?.nanos == null) {
        if (this.unpriced === 'refuse') return unpricedRefusal(info.model, path);
      } else nanos = bound.nanos;
    }
    const window = Math.floor(now / MINUTE_MS);
    let tokens = 0;
    if (key.rate_limit_tpm != null && cls !== 'free') {
      // An unpriced call's tokens are only known at its end: it is refused only when the window is full.
      const amount = bound?.tokens ?? 0;
      const wait = this.tpm.admit(key.id, key.rate_limit_tpm, now, amount, true);
      if (wait !== null)
        return new ProxyError('proxy_rate_limited', `Limit: ${key.rate_limit_tpm} tokens per minute.`, wait);
      tokens = amount;
    }
    let counted = false;
    if (key.rate_limit_rpm != null && (key.rate_limit_scope === 'all' || !isRpmExempt(method, path))) {
      const wait = this.rate.admit(key.id, key.rate_limit_rpm, now);
      if (wait !== null) {
        this.tpm.adjust(key.id, window, -tokens, now);
        return new ProxyError(
          'proxy_rate_limited',
          `Limit: ${key.rate_limit_rpm} requests per minute.`,
          wait,
        );
      }
      counted = true;
    }
    const tpm = key.rate_limit_tpm != null && cls !== 'free';
    const slot = key.max_concurrent != null;
    const reserve = hard && cls !== 'free';
    if (!tpm && !slot && !reserve) return null;
    const hold: Hold = {
      id: `${HOLD_PREFIX}${++holdSeq}`,
      keyId: key.id,
      tokens,
      window,
      tpm,
      nanos,
      spend: reserve ? spend : null,
      slot,
      shared: false,
      settled: false,
    };
    if (!slot && !reserve) return hold;
    const undo = () => {
      if (tokens > 0) this.tpm.adjust(key.id, window, -tokens, now);
      if (counted) this.rate.adjust(key.id, window, -1, now);
    };
    if (this.holds && !this.holdsFailing) return this.admitShared(key, hold, undo);
    if (reserve && hold.spend!.status !== 'loaded') {
      return this.spend.loaded(hold.spend!).then(() => this.admitLocal(key, hold, undo));
    }
    return this.admitLocal(key, hold, undo);
  }

  /** Takes the hold's slot and reservation from this instance's own counts. */
  private admitLocal(key: KeyRecord, hold: Hold, undo: () => void): Admission {
    const inUse = this.inflight.get(key.id) ?? 0;
    if (hold.slot && inUse >= key.max_concurrent!) {
      undo();
      return concurrencyRefusal(key);
    }
    const s = hold.spend;
    if (s) {
      // A period whose spend could not be loaded counts from what this instance saw (the load is retried).
      const budget = toNanos(key.budget_usd!);
      if (s.total + s.reserved + hold.nanos > budget) {
        undo();
        return budgetRefusal(key, s.period, budgetWait(s.total, hold.nanos, budget, s.end, this.now()));
      }
      s.reserved += hold.nanos;
    }
    if (hold.slot) this.inflight.set(key.id, inUse + 1);
    return hold;
  }

  /** Takes the slot and reservation in Redis, atomically across instances; on a Redis failure, locally. */
  private async admitShared(key: KeyRecord, hold: Hold, undo: () => void): Promise<Admission> {
    const s = hold.spend;
    if (s && s.status !== 'loaded') await this.spend.loaded(s);
    const budget = s ? toNanos(key.budget_usd!) : null;
    try {
      const reply = await this.holds!.admit(
        {
          keyId: key.id,
          holdId: hold.id,
          budget,
          amount: hold.nanos,
          period: s?.period ?? 'month',
          start: s?.start ?? 0,
          end: s?.end ?? 0,
          seed: s?.total ?? 0,
          slots: hold.slot ? key.max_concurrent : null,
        },
        this.now(),
        this.holdTtlMs,
      );
      if (s) s.total = Math.max(s.total, reply.spent + s.pending);
      if (!reply.ok) {
        undo();
        if (reply.reason === 'slots') return concurrencyRefusal(key);
        return budgetRefusal(
          key,
          s!.period,
          budgetWait(reply.spent, hold.nanos, budget!, s!.end, this.now()),
        );
      }
    } catch (err) {
      this.holdsFailed(err);
      return this.admitLocal(key, hold, undo);
    }
    hold.shared = true;
    let ids = this.running.get(key.id);
    if (!ids) this.running.set(key.id, (ids = new Set()));
    ids.add(hold.id);
    return hold;
  }

  private holdsFailed(err: unknown): void {
    if (!this.holdsFailing) this.onError(err, 'limit holds not shared through Redis; enforcing per instance');
    this.holdsFailing = true;
  }

  settle(hold: Hold | null, row: RequestLogRow | null): void {
    if (hold === null || hold.settled) return void (row && this.record(row));
    hold.settled = true;
    const now = this.now();
    if (hold.tpm) {
      const used = row ? (row.input_tokens ?? 0) + (row.output_tokens ?? 0) : 0;
      this.tpm.adjust(hold.keyId, hold.window, used - hold.tokens, now);
    }
    const cost = row?.cost_usd != null && row.cost_usd > 0 ? row.cost_usd : 0;
    if (!hold.shared) {
      if (hold.slot) {
        const n = (this.inflight.get(hold.keyId) ?? 1) - 1;
        if (n <= 0) this.inflight.delete(hold.keyId);
        else this.inflight.set(hold.keyId, n);
      }
      if (hold.spend) hold.spend.reserved -= hold.nanos;
      return void (row && this.record(row));
    }
    const ids = this.running.get(hold.keyId);
    ids?.delete(hold.id);
    if (ids?.size === 0) this.running.delete(hold.keyId);
    const s = hold.spend;
    // A shared hard budget gets the cost in the same script that drops the reservation; anything else (a
    // slot of a key with a soft budget) counts its cost through the periodic sync.
    if (!s) {
      if (row) this.record(row);
      // A slot without a reservation: released in Redis at no cost.
      return void this.holds!.settle(
        { keyId: hold.keyId, holdId: hold.id, period: 'month', start: 0, end: now },
        0,
        0,
        now,
      ).catch((err: unknown) => this.holdsFailed(err));
    }
    this.holds!.settle(
      { keyId: hold.keyId, holdId: hold.id, period: s.period, start: s.start, end: s.end },
      toNanos(cost),
      s.total,
      now,
    ).then(
      (total) => {
        if (row) this.spend.addSettled(hold.keyId, row.created_at, cost, total);
      },
      (err: unknown) => {
        // Counted through the sync instead; the reservation in Redis lapses with its TTL.
        this.holdsFailed(err);
        if (row) this.record(row);
      },
    );
  }

  /** One sync round with the shared counters (and the idle sweep); concurrent calls share the round. */
  sync(): Promise<void> {
    this.syncing ??= this.syncOnce()
      .catch((err: unknown) => this.onError(err, 'limit sync failed'))
      .finally(() => (this.syncing = null));
    return this.syncing;
  }

  private async syncOnce(): Promise<void> {
    const now = this.now();
    if (!this.shared) {
      if (now - this.lastSweep >= SWEEP_MS) {
        this.lastSweep = now;
        this.rate.sweep(now);
        this.spend.sweep(now);
      }
      return;
    }
    await this.refreshHolds(now);
    const tokens = this.tpm.collect(now);
    if (tokens.leftovers.length > 0) await this.shared.pushRate(tokens.leftovers, 'tpm');
    const tokenTotals = await this.shared.pushRate(tokens.current, 'tpm');
    tokens.current.forEach((d, i) => {
      const t = tokenTotals[i];
      if (t) this.tpm.apply(d, t[0], t[1]);
      else this.tpm.restore(d);
    });
    const { current, leftovers } = this.rate.collect(now);
    const spent = this.spend.collect(now);
    // Ended windows first (once a minute), so the previous-window totals read next include them.
    if (leftovers.length > 0) await this.shared.pushRate(leftovers);
    const [rateTotals, spendTotals] = await Promise.all([
      this.shared.pushRate(current),
      this.shared.pushSpend(spent, now),
    ]);
    let failed = false;
    current.forEach((d, i) => {
      const t = rateTotals[i];
      if (t) this.rate.apply(d, t[0], t[1]);
      else {
        failed = true;
        this.rate.restore(d);
      }
    });
    spent.forEach((d, i) => {
      const t = spendTotals[i];
      if (t !== null && t !== undefined) this.spend.apply(d, t);
      else {
        failed = true;
        this.spend.restore(d);
      }
    });
    // Reported once per outage, not every interval.
    if (failed && !this.syncFailing)
      this.onError(null, 'limit counters not synced with Redis; enforcing per instance');
    this.syncFailing = failed;
  }

  /** Pushes the expiry of this instance's running shared holds forward, a third of their TTL at a time. */
  private async refreshHolds(now: number): Promise<void> {
    if (!this.holds || now - this.lastRefresh < this.holdTtlMs / 3) return;
    this.lastRefresh = now;
    try {
      await this.holds.refresh(
        new Map([...this.running].map(([k, ids]) => [k, [...ids]])),
        now + this.holdTtlMs,
      );
      // Redis answers again: new holds are shared again.
      if (this.holdsFailing) this.onError(null, 'limit holds shared through Redis again');
      this.holdsFailing = false;
    } catch (err) {
      this.holdsFailed(err);
    }
  }

  /** Stops the sync after a last round, so this instance's counts reach the shared totals. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sync();
  }

  /** Keys with live counters (for tests and metrics). */
  get trackedKeys(): number {
    return Math.max(this.rate.size, this.spend.size, this.tpm.size);
  }

  /** Requests in flight holding a slot here (local enforcement), per key; for tests. */
  inFlight(keyId: string): number {
    return this.inflight.get(keyId) ?? 0;
  }
}

function budgetRefusal(key: KeyRecord, period: string, wait: number): ProxyError {
  return new ProxyError(
    'proxy_budget_exceeded',
    `Budget: $${key.budget_usd} per ${period} (UTC); it resets in ${wait} s.`,
    wait,
  );
}

/**
 * Until the period ends when the spend alone leaves no room for this request; else the room is held by
 * requests in flight, which free it (or spend it) as they end.
 */
function budgetWait(spent: number, amount: number, budget: number, end: number, now: number): number {
  return spent + amount > budget ? secondsUntil(end, now) : IN_FLIGHT_RETRY_S;
}

function concurrencyRefusal(key: KeyRecord): ProxyError {
  return new ProxyError(
    'proxy_rate_limited',
    `Limit: ${key.max_concurrent} requests in flight at once.`,
    IN_FLIGHT_RETRY_S,
  );
}

function unpricedRefusal(model: string | null, path: string): ProxyError {
  const what = model === null ? path.slice(0, 100) : `model ${model.slice(0, MAX_SHOWN_MODEL)}`;
  return new ProxyError(
    'proxy_key_forbidden',
    `This key has a hard budget and keyrelay knows no price for ${what}, so it cannot reserve its cost.`,
  );
}

function forbidden(key: KeyRecord, provider: Provider, model: string | null): ProxyError {
  if (key.allowed_providers && !key.allowed_providers.includes(provider)) {
    return new ProxyError('proxy_key_forbidden', `Provider ${provider} is not allowed for this key.`);
  }
  const shown = model === null ? 'a request without a model' : `model ${model.slice(0, MAX_SHOWN_MODEL)}`;
  return new ProxyError('proxy_key_forbidden', `This key does not allow ${shown}.`);
}

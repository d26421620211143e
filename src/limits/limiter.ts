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
import { fittedBound, isRpmExempt, requestClass } from './bound.js';
import { LeaseBook, type Lease } from './leases.js';
import type { Admission, Hold, Limits } from './types.js';
import { MINUTE_MS, secondsUntil } from './periods.js';
import {
  budgetRefusal,
  budgetWait,
  concurrencyRefusal,
  forbidden,
  rateRefusal,
  unpricedRefusal,
} from './refusals.js';
import { RateCounters } from './rate.js';
import { syncCounters, type SharedCounters } from './redis-counters.js';
import type { SharedHolds } from './redis-holds.js';
import { SpendLedger, toNanos, type SpendState } from './spend.js';

export type { Admission, Hold, Limits } from './types.js';

/** What a hard budget has left for new reservations here (0 while the period's spend is not loaded). */
const budgetRoom = (s: SpendState, budgetUsd: number) =>
  s.status === 'loaded' ? toNanos(budgetUsd) - s.total - s.reserved : 0;

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
const SWEEP_MS = 30_000;

export class KeyLimiter implements Limits {
  private readonly rate: RateCounters;
  private readonly tpm: RateCounters;
  private readonly spend: SpendLedger;
  private readonly shared: SharedCounters | null;
  private readonly holds: SharedHolds | null;
  private readonly leases: LeaseBook | null;
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
    this.leases = this.holds
      ? new LeaseBook(this.holds, `${HOLD_PREFIX}lease.`, this.holdTtlMs, this.now, (err, lease) =>
          this.leaseFailed(err, lease),
        )
      : null;
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
        return rateRefusal(`${key.rate_limit_rpm} requests`, wait);
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
    // Against the room the key's limits have left: the prompt in bytes where that is small beside it.
    const bound =
      cls !== 'tokens'
        ? null
        : fittedBound(provider, info, this.defaultOutputTokens, {
            tokens: key.rate_limit_tpm == null ? null : () => this.tpm.room(key.id, key.rate_limit_tpm!, now),
            nanos: !hard ? null : () => budgetRoom(spend!, key.budget_usd!),
          });
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
      if (wait !== null) return rateRefusal(`${key.rate_limit_tpm} tokens`, wait);
      tokens = amount;
    }
    let counted = false;
    if (key.rate_limit_rpm != null && (key.rate_limit_scope === 'all' || !isRpmExempt(method, path))) {
      const wait = this.rate.admit(key.id, key.rate_limit_rpm, now);
      if (wait !== null) {
        this.tpm.adjust(key.id, window, -tokens, now);
        return rateRefusal(`${key.rate_limit_rpm} requests`, wait);
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
      lease: null,
      leased: 0,
      settled: false,
    };
    if (!slot && !reserve) return hold;
    const undo = () => {
      if (tokens > 0) this.tpm.adjust(key.id, window, -tokens, now);
      if (counted) this.rate.adjust(key.id, window, -1, now);
    };
    if (this.holds && !this.holdsFailing) {
      if (reserve && !slot && spend!.status === 'loaded') {
        const taken = this.leases!.take(key.id, spend!, toNanos(key.budget_usd!), nanos);
        if (taken) {
          hold.lease = taken.lease;
          hold.leased = taken.part;
          if (taken.part === nanos) return hold;
        }
      }
      return this.admitShared(key, hold, undo);
    }
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
          amount: hold.nanos - hold.leased,
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
        this.returnLeased(hold);
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
      this.returnLeased(hold);
      return this.admitLocal(key, hold, undo);
    }
    hold.shared = true;
    let ids = this.running.get(key.id);
    if (!ids) this.running.set(key.id, (ids = new Set()));
    ids.add(hold.id);
    return hold;
  }

  /** Gives back the part of a hold's reservation taken from its lease (refused, or going local). */
  private returnLeased(hold: Hold): void {
    if (hold.lease === null) return;
    this.leases!.settle(hold.lease, hold.leased, 0);
    if (hold.lease.dead) hold.lease.spend.reserved -= hold.leased;
    hold.lease = null;
    hold.leased = 0;
  }

  /**
   * A lease Redis could not renew: its costs go to the ledger (pushed by the counters' sync once Redis
   * answers), its requests in flight count as this instance's reservations, and admission goes local.
   */
  private leaseFailed(err: unknown, lease: Lease): void {
    this.holdsFailed(err);
    lease.spend.pending += lease.spent;
    lease.spent = 0;
    lease.spend.reserved += lease.open;
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
    const lease = hold.lease;
    if (lease && !hold.shared) {
      // The cost stays in the lease (still held in Redis) until its renewal moves it into the spend.
      this.leases!.settle(lease, hold.leased, lease.dead ? 0 : toNanos(cost));
      if (!lease.dead) lease.spend.total += toNanos(cost);
      else {
        lease.spend.reserved -= hold.leased;
        if (row) this.record(row);
      }
      return;
    }
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
        // Part of the reservation was the lease's: freed only now that Redis has the cost.
        this.returnLeased(hold);
      },
      (err: unknown) => {
        // Counted through the sync instead; the reservation in Redis lapses with its TTL.
        this.holdsFailed(err);
        if (row) this.record(row);
        this.returnLeased(hold);
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
    await this.leases?.renewAll();
    const failed = await syncCounters(this.shared, this.rate, this.tpm, this.spend, now);
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
    await this.leases?.releaseAll();
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

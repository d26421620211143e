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
 *
 * A key's caps per end user are admitted first, as a key of their own (end-users.ts), then the key's own
 * limits; the request's hold carries the end user's, settled with it.
 */
import { ProxyError } from '../errors.js';
import type { Provider, RequestLogRow } from '../types.js';
import type { KeyRateStatus, KeyRecord, LogStore } from '../store/types.js';
import type { RequestInfo } from '../metering/index.js';
import { isRequestAllowed, refusedModel } from './access.js';
import { countsRpm, fittedBound, requestClass } from './bound.js';
import { LocalHolds } from './local/holds.js';
import { RateCounters } from './local/rate.js';
import { SpendLedger, toNanos, type SpendState } from './local/spend.js';
import { SharedHoldBook } from './shared/holds.js';
import { syncCounters, type SharedCounters } from './shared/redis-counters.js';
import type { SharedHolds } from './shared/redis-holds.js';
import type { Admission, Hold, Limits } from './types.js';
import { MINUTE_MS, secondsUntil } from './periods.js';
import { readRateStatus } from './rate-status.js';
import { budgetRefusal, forbidden, perEndUser, rateRefusal, unpricedRefusal } from './refusals.js';
import { endUserKey } from './end-users.js';
import { memberKey, type MemberSpendSince } from './members.js';
import { admitLevels, bareHold, HOLD_PREFIX, levelSpendSince } from './levels.js';

export type { Admission, Hold, Limits } from './types.js';

/** What a hard budget has left for new reservations here (0 while the period's spend is not loaded). */
const budgetRoom = (s: SpendState, budgetUsd: number) =>
  s.status === 'loaded' ? toNanos(budgetUsd) - s.total - s.reserved : 0;

export interface LimiterOptions {
  spendSince: LogStore['spendSince'];
  /** A member's spend across their keys (members.ts); without it, a member's budget counts from zero. */
  memberSpendSince?: MemberSpendSince;
  shared?: SharedCounters | null;
  /** Shared reservations and in-flight slots (Redis); null: this instance's own. */
  holds?: SharedHolds | null;
  syncMs?: number;
  now?: () => number;
  onError?: (err: unknown, msg: string) => void;
  /** Output tokens reserved for a request that names no maximum (DEFAULT_OUTPUT_TOKENS). */
  defaultOutputTokens?: number;
  /** How long a shared hold outlives its instance's last refresh (DEFAULT_HOLD_TTL_MS). */
  holdTtlMs?: number;
}

export const DEFAULT_SYNC_MS = 200;
/** A typical chat answer's ceiling: enough to hold a hard budget's worst case without refusing most calls. */
export const DEFAULT_OUTPUT_TOKENS = 4096;
/** A crashed instance's holds lapse within a minute; a live one refreshes every third of it. */
export const DEFAULT_HOLD_TTL_MS = 60_000;
const SWEEP_MS = 30_000;

export class KeyLimiter implements Limits {
  private readonly rate: RateCounters;
  private readonly tpm: RateCounters;
  private readonly spend: SpendLedger;
  private readonly shared: SharedCounters | null;
  /** Slots and reservations on this instance's own counts (without Redis, or while it fails). */
  private readonly local: LocalHolds;
  /** Slots and reservations shared through Redis; null: none. */
  private readonly holds: SharedHoldBook | null;
  private readonly defaultOutputTokens: number;
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
    this.defaultOutputTokens = opts.defaultOutputTokens ?? DEFAULT_OUTPUT_TOKENS;
    this.rate = new RateCounters(this.shared !== null);
    this.tpm = new RateCounters(this.shared !== null);
    this.spend = new SpendLedger(levelSpendSince(opts.spendSince, opts.memberSpendSince), (err) =>
      this.onError(err, 'budget spend could not be loaded; retrying'),
    );
    this.local = new LocalHolds(this.now);
    this.holds = opts.holds
      ? new SharedHoldBook(opts.holds, this.spend, this.local, {
          prefix: HOLD_PREFIX,
          ttlMs: opts.holdTtlMs ?? DEFAULT_HOLD_TTL_MS,
          now: this.now,
          onError: this.onError,
          record: (row) => this.record(row),
        })
      : null;
    this.timer = setInterval(() => void this.sync(), opts.syncMs ?? DEFAULT_SYNC_MS);
    this.timer.unref();
  }

  check(key: KeyRecord, provider: Provider, model: string | null, method?: string): ProxyError | null {
    const refused = this.checkKey(key, provider, model, method);
    if (refused !== null) return refused;
    const member = memberKey(key);
    if (member === null) return null;
    const theirs = this.checkKey(member, provider, model, method);
    // Refused by the member's limits: the key's rpm does not count it.
    if (theirs !== null && countsRpm(key, method ?? 'GET', ''))
      this.rate.adjust(key.id, Math.floor(this.now() / MINUTE_MS), -1, this.now());
    return theirs;
  }

  private checkKey(
    key: KeyRecord,
    provider: Provider,
    model: string | null,
    method?: string,
  ): ProxyError | null {
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
    if (countsRpm(key, method ?? 'GET', '')) {
      const wait = this.rate.admit(key.id, key.rate_limit_rpm!, now);
      if (wait !== null) {
        return rateRefusal(`${key.rate_limit_rpm} requests${perEndUser(key)}`, wait);
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
    endUser: string | null = null,
  ): Admission | Promise<Admission> {
    const user = endUser === null ? null : endUserKey(key, endUser);
    const member = memberKey(key);
    if (user === null && member === null) return this.admitKey(key, provider, info, method);
    // What the key may not do at all is refused as such, whatever the end user's or member's counts.
    const refused = refusedModel(key, provider, info, method);
    if (refused !== undefined) return forbidden(key, provider, refused);
    // The narrowest first: the end user's caps, the key's own limits, the member's across their keys. Each
    // is a key of its own; the first to refuse answers, and what the others took is given back.
    const levels: KeyRecord[] = [];
    if (user) levels.push(user);
    levels.push(key);
    if (member) levels.push(member);
    const window = Math.floor(this.now() / MINUTE_MS);
    const ops = {
      window,
      admit: (level: KeyRecord) => this.admitKey(level, provider, info, method),
      release: (level: KeyRecord, hold: Hold) => {
        this.settle(hold, null);
        // A refused request does not count against the others' rates, as it does not against the refuser's.
        if (countsRpm(level, method, info.path)) this.rate.adjust(level.id, hold.window, -1, this.now());
      },
    };
    return admitLevels(levels, ops, (holds) => {
      const own = holds[user ? 1 : 0]!;
      if (user) own.user = holds[0]!;
      if (member) own.member = holds[holds.length - 1]!;
      return own;
    });
  }

  private admitKey(
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
    const refused = refusedModel(key, provider, info, method);
    if (refused !== undefined) return forbidden(key, provider, refused);
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
        if (key.budget_unpriced === 'refuse') return unpricedRefusal(info.model, path, key);
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
    if (countsRpm(key, method, path)) {
      const wait = this.rate.admit(key.id, key.rate_limit_rpm!, now);
      if (wait !== null) {
        this.tpm.adjust(key.id, window, -tokens, now);
        return rateRefusal(`${key.rate_limit_rpm} requests${perEndUser(key)}`, wait);
      }
      counted = true;
    }
    const tpm = key.rate_limit_tpm != null && cls !== 'free';
    const slot = key.max_concurrent != null;
    const reserve = hard && cls !== 'free';
    if (!tpm && !slot && !reserve) return null;
    const hold: Hold = {
      ...bareHold(key.id, window),
      tokens,
      tpm,
      nanos,
      spend: reserve ? spend : null,
      slot,
    };
    if (!slot && !reserve) return hold;
    const undo = () => {
      if (tokens > 0) this.tpm.adjust(key.id, window, -tokens, now);
      if (counted) this.rate.adjust(key.id, window, -1, now);
    };
    if (this.holds && !this.holds.failing) return this.holds.admit(key, hold, undo);
    if (reserve && hold.spend!.status !== 'loaded') {
      return this.spend.loaded(hold.spend!).then(() => this.local.admit(key, hold, undo));
    }
    return this.local.admit(key, hold, undo);
  }

  settle(hold: Hold | null, row: RequestLogRow | null): void {
    if (hold === null || hold.settled) return void (row && this.record(row));
    hold.settled = true;
    if (hold.user) {
      // The end user's counts are a key of their own: the row's cost goes to that key's budget too.
      const user = hold.user;
      hold.user = null;
      this.settle(user, row && { ...row, key_id: user.keyId, end_user: null });
    }
    if (hold.member) {
      // The member's counts too: the row's cost goes to the member's budget across their keys.
      const member = hold.member;
      hold.member = null;
      this.settle(member, row && { ...row, key_id: member.keyId, end_user: null });
    }
    const now = this.now();
    if (hold.tpm) {
      const used = row ? (row.input_tokens ?? 0) + (row.output_tokens ?? 0) : 0;
      this.tpm.adjust(hold.keyId, hold.window, used - hold.tokens, now);
    }
    const cost = row?.cost_usd != null && row.cost_usd > 0 ? row.cost_usd : 0;
    if (hold.shared || hold.lease !== null) return this.holds!.settle(hold, row, cost, now);
    this.local.release(hold);
    if (row) this.record(row);
  }

  /**
   * How much of the key's requests- and tokens-per-minute limits is in use now, as admission counts it (with
   * Redis, every instance's totals); null for a key without either limit.
   */
  rateStatus(key: KeyRecord): Promise<KeyRateStatus | null> {
    const now = this.now();
    const peek = (kind: 'rpm' | 'tpm') => (kind === 'rpm' ? this.rate : this.tpm).peek(key.id, now);
    return readRateStatus(key, now, peek, this.shared);
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
    await this.holds?.sync(now);
    const failed = await syncCounters(this.shared, this.rate, this.tpm, this.spend, now);
    // Reported once per outage, not every interval.
    if (failed && !this.syncFailing)
      this.onError(null, 'limit counters not synced with Redis; enforcing per instance');
    this.syncFailing = failed;
  }

  /** Stops the sync after a last round, so this instance's counts reach the shared totals. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.holds?.close();
    await this.sync();
  }

  /** Keys with live counters (for tests and metrics). */
  get trackedKeys(): number {
    return Math.max(this.rate.size, this.spend.size, this.tpm.size);
  }

  /** Requests in flight holding a slot here (local enforcement), per key; for tests. */
  inFlight(keyId: string): number {
    return this.local.inFlight(keyId);
  }
}

/**
 * Per-key controls on the proxy's hot path (docs/limits.md): allowed providers and models, requests per
 * minute, and a spend budget per UTC day or month. `check` is synchronous and touches only memory: keys
 * without limits return after four comparisons, and the limits themselves come from the KeyRecord the key
 * cache hands the proxy, so a changed limit applies as soon as the key event evicts the cached record.
 *
 * With shared counters (Redis), a background sync every `syncMs` adds this instance's counts to the shared
 * totals and reads back every instance's: the limits then hold across instances, give or take what the
 * other instances admit within one sync interval. Without them, each instance enforces on its own counts.
 * A sync that fails (Redis down) keeps its counts for the next one; meanwhile enforcement is per instance.
 */
import { ProxyError } from '../errors.js';
import type { Provider, RequestLogRow } from '../types.js';
import type { KeyRecord, LogStore } from '../store/types.js';
import { isRequestAllowed } from './access.js';
import { RateCounters } from './rate.js';
import type { SharedCounters } from './redis-counters.js';
import { SpendLedger } from './spend.js';

export interface Limits {
  /** The refusal for this request, or null to let it through (and count it against the rate limit). */
  check(key: KeyRecord, provider: Provider, model: string | null, method?: string): ProxyError | null;
  /** A finished request's log row: its cost counts against the key's budget. */
  record(row: RequestLogRow): void;
}

export interface LimiterOptions {
  spendSince: LogStore['spendSince'];
  shared?: SharedCounters | null;
  syncMs?: number;
  now?: () => number;
  onError?: (err: unknown, msg: string) => void;
}

export const DEFAULT_SYNC_MS = 200;
const SWEEP_MS = 30_000;
const MAX_SHOWN_MODEL = 100;

export class KeyLimiter implements Limits {
  private readonly rate: RateCounters;
  private readonly spend: SpendLedger;
  private readonly shared: SharedCounters | null;
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
    this.rate = new RateCounters(this.shared !== null);
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
      if (wait !== null) {
        return new ProxyError(
          'proxy_budget_exceeded',
          `Budget: $${key.budget_usd} per ${period} (UTC); it resets in ${wait} s.`,
          wait,
        );
      }
    }
    if (key.rate_limit_rpm != null) {
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

  /** Stops the sync after a last round, so this instance's counts reach the shared totals. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sync();
  }

  /** Keys with live counters (for tests and metrics). */
  get trackedKeys(): number {
    return Math.max(this.rate.size, this.spend.size);
  }
}

function forbidden(key: KeyRecord, provider: Provider, model: string | null): ProxyError {
  if (key.allowed_providers && !key.allowed_providers.includes(provider)) {
    return new ProxyError('proxy_key_forbidden', `Provider ${provider} is not allowed for this key.`);
  }
  const shown = model === null ? 'a request without a model' : `model ${model.slice(0, MAX_SHOWN_MODEL)}`;
  return new ProxyError('proxy_key_forbidden', `This key does not allow ${shown}.`);
}

/**
 * Budget spend per key and UTC period. Amounts are integer nanodollars, so adding many tiny costs (and
 * Redis INCRBY across instances) is exact. The period's spend before this instance first saw the key comes
 * from the request log once (`spendSince`), in the background: until it arrives the key is not refused.
 *
 * Budgets are soft: a request is admitted while the spend so far is under the budget, and its cost is only
 * known when it ends, so requests in flight (and, across instances, one sync interval) can overshoot.
 */
import { NANOS_PER_USD } from '../../store/log-query.js';
import type { BudgetPeriod } from '../../store/types.js';
import { periodBounds, secondsUntil } from '../periods.js';

export const toNanos = (usd: number) => Math.round(usd * NANOS_PER_USD);

export interface SpendState {
  period: BudgetPeriod;
  start: number;
  end: number;
  startIso: string;
  endIso: string;
  status: 'new' | 'loading' | 'loaded';
  retryLoadAt: number;
  total: number; // nanodollars spent in the period: log + recorded here (+ other instances when shared)
  pending: number; // recorded here and not yet added to the shared total
  /** Hard budgets: nanodollars reserved by this instance's requests in flight. */
  reserved: number;
  lastSeen: number;
  /** Hard-budget admissions waiting for the log's spend. */
  waiters: (() => void)[] | null;
}

export interface SpendDelta {
  keyId: string;
  period: BudgetPeriod;
  start: number;
  end: number;
  delta: number;
  /** This instance's whole estimate: what the shared total starts from if it does not exist (yet, again). */
  seed: number;
}

const LOAD_RETRY_MS = 5_000;
const IDLE_MS = 10 * 60_000;
/** Keys whose shared total is read back, though nothing was recorded here since the last sync. */
const ACTIVE_MS = 2 * 60_000;

export class SpendLedger {
  private states = new Map<string, SpendState>();

  constructor(
    private readonly loadSpend: (keyId: string, since: string) => Promise<number>,
    private readonly onLoadError: (err: unknown) => void,
  ) {}

  /** Null while the budget is not spent (or not known yet); else seconds until the period ends. */
  exceeded(keyId: string, budgetUsd: number, period: BudgetPeriod, now: number): number | null {
    const s = this.state(keyId, period, now);
    if (s.status !== 'loaded') return null;
    return s.total >= toNanos(budgetUsd) ? secondsUntil(s.end, now) : null;
  }

  /**
   * The key's state in the current period (created, and its log spend loading, on first sight). A hard
   * budget cannot admit on a guess: it waits for `loaded` when the status is not `loaded` yet.
   */
  state(keyId: string, period: BudgetPeriod, now: number): SpendState {
    let s = this.states.get(keyId);
    if (!s || s.period !== period || now >= s.end || now < s.start) {
      const { start, end } = periodBounds(period, now);
      s = {
        period,
        start,
        end,
        startIso: new Date(start).toISOString(),
        endIso: new Date(end).toISOString(),
        status: 'new',
        retryLoadAt: 0,
        total: 0,
        pending: 0,
        reserved: 0,
        lastSeen: now,
        waiters: null,
      };
      this.states.set(keyId, s);
    }
    s.lastSeen = now;
    if (s.status === 'new' && now >= s.retryLoadAt) this.load(keyId, s, now);
    return s;
  }

  /** Resolves once the state's log spend is loaded, true; false if loading failed (retried later). */
  loaded(s: SpendState): Promise<boolean> {
    if (s.status === 'loaded') return Promise.resolve(true);
    return new Promise((resolve) => (s.waiters ??= []).push(() => resolve(s.status === 'loaded')));
  }

  /** Adds a finished request's cost to its key's period (ignored for keys without a budget here). */
  add(keyId: string, createdAt: string, costUsd: number): void {
    const s = this.states.get(keyId);
    if (!s) return;
    // Log rows' times are toISOString() strings, so comparing the text compares the times.
    if (createdAt < s.startIso || createdAt >= s.endIso) return;
    const n = toNanos(costUsd);
    s.total += n;
    s.pending += n;
  }

  private load(keyId: string, s: SpendState, now: number): void {
    s.status = 'loading';
    // Off the request's synchronous path: a SqliteLogStore runs its query inside the call.
    setImmediate(() => this.startLoad(keyId, s, now));
  }

  private startLoad(keyId: string, s: SpendState, now: number): void {
    this.loadSpend(keyId, s.startIso).then(
      (usd) => {
        // Costs recorded while the query ran are already in total; a row flushed to the log in that same
        // moment would count twice, which errs on the strict side and is rare (flushes lag by ~250 ms).
        s.total += toNanos(usd);
        s.status = 'loaded';
        wake(s);
      },
      (err: unknown) => {
        s.status = 'new';
        s.retryLoadAt = now + LOAD_RETRY_MS;
        this.onLoadError(err);
        wake(s);
      },
    );
  }

  /** Pending amounts of loaded, recently active keys (moved to the caller), and drops idle keys. */
  collect(now: number): SpendDelta[] {
    const out: SpendDelta[] = [];
    for (const [keyId, s] of this.states) {
      const idle = now - s.lastSeen;
      if ((idle > IDLE_MS || now >= s.end) && s.pending === 0 && s.reserved === 0) {
        this.states.delete(keyId);
        continue;
      }
      if (s.status !== 'loaded' || (s.pending === 0 && idle > ACTIVE_MS)) continue;
      out.push({ keyId, period: s.period, start: s.start, end: s.end, delta: s.pending, seed: s.total });
      s.pending = 0;
    }
    return out;
  }

  /** A hard budget's cost, already added to the shared total by its settle (total: that total, or -1). */
  addSettled(keyId: string, createdAt: string, costUsd: number, total: number): void {
    const s = this.states.get(keyId);
    if (!s || createdAt < s.startIso || createdAt >= s.endIso) return;
    if (total >= 0) s.total = Math.max(s.total, total + s.pending);
    else this.add(keyId, createdAt, costUsd);
  }

  /** The shared total after a push (every instance's spend in the period). */
  apply(d: SpendDelta, total: number): void {
    const s = this.states.get(d.keyId);
    if (s && s.start === d.start && s.period === d.period) s.total = total + s.pending;
  }

  restore(d: SpendDelta): void {
    const s = this.states.get(d.keyId);
    if (s && s.start === d.start && s.period === d.period) s.pending += d.delta;
  }

  /** Drops idle keys (when there is no sync, which otherwise does this in collect). */
  sweep(now: number): void {
    for (const [keyId, s] of this.states) {
      if ((now - s.lastSeen > IDLE_MS || now >= s.end) && s.reserved === 0) this.states.delete(keyId);
    }
  }

  get size(): number {
    return this.states.size;
  }
}

function wake(s: SpendState): void {
  const waiters = s.waiters;
  s.waiters = null;
  if (waiters) for (const w of waiters) w();
}

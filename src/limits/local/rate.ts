/**
 * Requests per minute per key, as a sliding-window estimate over two fixed one-minute windows (the
 * previous window's count weighted by how much of it still overlaps the last 60 s, plus the current
 * window's count). Fixed windows are what a shared counter can hold (one Redis key per key and minute);
 * the weighting removes the burst of 2×limit a plain fixed window allows at its boundary. The weighted part
 * is rounded up, so the estimate never under-counts by a fraction.
 *
 * Counting is local and synchronous; `collect`/`apply` let a background sync add this instance's counts
 * to a shared total and read back what every instance counted (see limiter.ts).
 */
import { MINUTE_MS } from '../periods.js';

interface RateState {
  window: number; // index of the current one-minute window (epoch ms / 60 000)
  count: number; // requests in this window: the last shared total plus what is still pending here
  pending: number; // admitted here and not yet added to the shared total
  prev: number; // requests in the previous window
  lastSeen: number;
}

export interface RateDelta {
  keyId: string;
  window: number;
  delta: number;
}

/** States idle this long are dropped: their windows no longer weigh on any estimate. */
const IDLE_MS = 2 * MINUTE_MS;

export class RateCounters {
  private states = new Map<string, RateState>();
  /** Counts of windows that ended before they were pushed; only kept when a sync collects them. */
  private leftovers: RateDelta[] = [];

  constructor(private readonly shared: boolean) {}

  /**
   * Counts `amount` (one request, or a request's tokens) and returns null, or returns the seconds until it
   * would be admitted. With `alwaysFirst`, an amount larger than the whole limit is still admitted into an
   * empty window (a request bigger than the tokens-per-minute limit would otherwise never pass).
   */
  admit(keyId: string, rpm: number, now: number, amount = 1, alwaysFirst = false): number | null {
    const window = Math.floor(now / MINUTE_MS);
    let s = this.states.get(keyId);
    if (!s) {
      s = { window, count: 0, pending: 0, prev: 0, lastSeen: now };
      this.states.set(keyId, s);
    } else if (s.window !== window) {
      this.roll(keyId, s, window);
    }
    s.lastSeen = now;
    const elapsed = (now - window * MINUTE_MS) / MINUTE_MS;
    const used = Math.ceil(s.prev * (1 - elapsed)) + s.count;
    if (used + amount > rpm && !(alwaysFirst && used <= 0)) {
      return Math.max(1, Math.ceil(waitFraction(s.prev, s.count, rpm, elapsed, amount) * 60));
    }
    s.count += amount;
    s.pending += amount;
    return null;
  }

  /** What `admit` would still let in now (limit minus the estimate), without counting anything. */
  room(keyId: string, limit: number, now: number): number {
    const s = this.states.get(keyId);
    if (!s) return limit;
    const window = Math.floor(now / MINUTE_MS);
    if (s.window !== window) return limit - (s.window === window - 1 ? s.count : 0);
    const elapsed = (now - window * MINUTE_MS) / MINUTE_MS;
    return limit - (Math.ceil(s.prev * (1 - elapsed)) + s.count);
  }

  /**
   * The key's counts as `admit` would weigh them now, without counting or rolling anything: the previous
   * window's count, the current one's, and how much of it this instance has not yet added to a shared total.
   */
  peek(keyId: string, now: number): { prev: number; count: number; pending: number } {
    const s = this.states.get(keyId);
    const window = Math.floor(now / MINUTE_MS);
    if (!s || s.window < window - 1) return { prev: 0, count: 0, pending: 0 };
    if (s.window === window - 1) return { prev: s.count, count: 0, pending: 0 };
    return { prev: s.prev, count: s.count, pending: s.pending };
  }

  /**
   * Corrects an admitted amount (a request's real tokens once it ended, or an admission taken back). A refund
   * goes to the window that counted it while that window still weighs on the estimate (the current one or
   * the one before: a request that ends after a minute boundary must not leave its whole reservation
   * counted for the next minute); more usage than admitted is counted in the current window (late, never
   * lost).
   */
  adjust(keyId: string, window: number, delta: number, now: number): void {
    if (delta === 0) return;
    const s = this.states.get(keyId);
    if (!s) return;
    const current = Math.floor(now / MINUTE_MS);
    if (s.window !== current) this.roll(keyId, s, current);
    if (delta > 0 || window === s.window) {
      s.count += delta;
      s.pending += delta;
    } else if (window === s.window - 1) {
      const refund = Math.max(delta, -s.prev);
      s.prev += refund;
      // The ended window's shared total gets it too, with the next sync's leftovers.
      if (this.shared && refund < 0) this.leftovers.push({ keyId, window, delta: refund });
    }
  }

  private roll(keyId: string, s: RateState, window: number): void {
    if (this.shared && s.pending > 0) this.leftovers.push({ keyId, window: s.window, delta: s.pending });
    s.prev = window === s.window + 1 ? s.count : 0;
    s.window = window;
    s.count = 0;
    s.pending = 0;
  }

  /** Takes every recently active key's pending count (moved to the caller), plus ended windows' leftovers. */
  collect(now: number): { current: RateDelta[]; leftovers: RateDelta[] } {
    const current: RateDelta[] = [];
    const window = Math.floor(now / MINUTE_MS);
    for (const [keyId, s] of this.states) {
      if (s.window !== window) {
        if (now - s.lastSeen > IDLE_MS && s.pending === 0) this.states.delete(keyId);
        else if (s.window < window) this.roll(keyId, s, window);
        else continue;
      }
      current.push({ keyId, window: s.window, delta: s.pending });
      s.pending = 0;
    }
    const leftovers = this.leftovers;
    this.leftovers = [];
    return { current, leftovers };
  }

  /** The shared totals after a push: every instance's count of the window and of the one before. */
  apply(d: RateDelta, total: number, prevTotal: number): void {
    const s = this.states.get(d.keyId);
    if (!s || s.window !== d.window) return;
    s.count = total + s.pending;
    s.prev = Math.max(s.prev, prevTotal);
  }

  /** A push that failed: its counts go back to pending (or are dropped if their window has ended). */
  restore(d: RateDelta): void {
    const s = this.states.get(d.keyId);
    if (s && s.window === d.window) s.pending += d.delta;
  }

  /** Drops idle keys (used when there is no sync, which otherwise does this in collect). */
  sweep(now: number): void {
    for (const [keyId, s] of this.states) if (now - s.lastSeen > IDLE_MS) this.states.delete(keyId);
  }

  get size(): number {
    return this.states.size;
  }
}

/**
 * A limit's headroom from a window's counts (`peek`, or the shared totals): the estimate `admit` compares
 * against the limit, how long until one more fits (0 while one fits now), and how long until nothing
 * counted so far weighs on the estimate (0 with nothing counted).
 */
export function rateUse(
  prev: number,
  count: number,
  limit: number,
  now: number,
): { used: number; freesInMs: number; clearsInMs: number } {
  const window = Math.floor(now / MINUTE_MS);
  const elapsed = (now - window * MINUTE_MS) / MINUTE_MS;
  const used = Math.ceil(prev * (1 - elapsed)) + count;
  const freesInMs =
    used + 1 > limit ? Math.ceil(waitFraction(prev, count, limit, elapsed, 1) * MINUTE_MS) : 0;
  // What the current window counted weighs on the next one until it ends too.
  const clearsInMs = used === 0 ? 0 : Math.ceil((1 - elapsed + (count > 0 ? 1 : 0)) * MINUTE_MS);
  return { used, freesInMs, clearsInMs };
}

/**
 * Fraction of a minute until the estimate drops below `rpm` (assuming no other request arrives):
 * within this window while the current count alone fits, else after the window ends.
 */
function waitFraction(prev: number, count: number, rpm: number, elapsed: number, amount: number): number {
  if (count + amount <= rpm) return prev === 0 ? 0 : Math.max(0, 1 - elapsed - (rpm - amount - count) / prev);
  // Next window: what is counted now weighs as its previous one; beyond that, wait out both windows.
  return 1 - elapsed + (count === 0 ? 1 : Math.min(1, Math.max(0, 1 - (rpm - amount) / count)));
}

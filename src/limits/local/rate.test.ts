import { describe, expect, it } from 'vitest';
import { RateCounters, rateUse } from './rate.js';

const MIN = 60_000;
const T = 1_000 * MIN; // the start of a minute

describe('RateCounters', () => {
  it('admits rpm requests in a minute, then answers the seconds until the next window', () => {
    const r = new RateCounters(false);
    for (let i = 0; i < 3; i++) expect(r.admit('k', 3, T + 1_000 * i)).toBeNull();
    // Current window full: wait for it to end (57 s), then until the weighted 3 fall to 2 (another 20 s).
    expect(r.admit('k', 3, T + 3_000)).toBe(77);
  });

  it('weighs the previous window by its overlap with the last minute, rounding up', () => {
    const r = new RateCounters(false);
    for (let i = 0; i < 4; i++) expect(r.admit('k', 4, T + 50_000)).toBeNull();
    // 15 s into the next window, 4 × 0.75 = 3 still count: one more fits, then none.
    expect(r.admit('k', 4, T + MIN + 15_000)).toBeNull();
    const wait = r.admit('k', 4, T + MIN + 15_001)!;
    expect(wait).toBeGreaterThan(0);
    // At the suggested time one request is admitted again.
    expect(r.admit('k', 4, T + MIN + 15_001 + wait * 1000)).toBeNull();
  });

  it('does not let a burst at a window boundary double the limit', () => {
    const r = new RateCounters(false);
    let admitted = 0;
    for (let i = 0; i < 20; i++) if (r.admit('k', 10, T + MIN - 100) === null) admitted++;
    for (let i = 0; i < 20; i++) if (r.admit('k', 10, T + MIN + 100) === null) admitted++;
    expect(admitted).toBe(10);
  });

  it('keeps keys apart and forgets a window older than the previous one', () => {
    const r = new RateCounters(false);
    expect(r.admit('a', 1, T)).toBeNull();
    expect(r.admit('b', 1, T)).toBeNull();
    expect(r.admit('a', 1, T)).not.toBeNull();
    expect(r.admit('a', 1, T + 2 * MIN)).toBeNull();
  });

  it('hands pending counts to a sync and adopts the shared totals it reads back', () => {
    const r = new RateCounters(true);
    expect(r.admit('k', 5, T)).toBeNull();
    expect(r.admit('k', 5, T)).toBeNull();
    const { current } = r.collect(T + 100);
    expect(current).toEqual([{ keyId: 'k', window: T / MIN, delta: 2 }]);
    expect(r.admit('k', 5, T + 150)).toBeNull(); // pending while the push is in flight
    r.apply(current[0]!, 4, 0); // 2 from here + 2 from another instance
    expect(r.admit('k', 5, T + 200)).not.toBeNull(); // 4 shared + 1 pending = 5
  });

  it('puts counts of a failed push back, and pushes a rolled window’s counts as leftovers', () => {
    const r = new RateCounters(true);
    r.admit('k', 5, T);
    const first = r.collect(T + 10).current[0]!;
    r.restore(first);
    expect(r.collect(T + 20).current[0]!.delta).toBe(1);
    r.admit('k', 5, T + 30);
    r.admit('k', 5, T + MIN + 1); // rolls the window with one pending
    const { current, leftovers } = r.collect(T + MIN + 2);
    expect(leftovers).toEqual([{ keyId: 'k', window: T / MIN, delta: 1 }]);
    expect(current).toEqual([{ keyId: 'k', window: T / MIN + 1, delta: 1 }]);
  });

  it('drops idle keys', () => {
    const r = new RateCounters(false);
    r.admit('k', 5, T);
    r.sweep(T + 3 * MIN);
    expect(r.size).toBe(0);
  });
});

describe('RateCounters.adjust', () => {
  it('refunds tokens to the window that counted them, also once it has ended; more usage lands in the current one', () => {
    const r = new RateCounters(false);
    const t0 = 10 * 60_000; // start of window 10
    expect(r.admit('k', 100, t0, 80, true)).toBeNull();
    r.adjust('k', 10, -60, t0 + 1000); // the request used 20 of its 80
    expect(r.admit('k', 100, t0 + 2000, 80)).toBeNull(); // 20 + 80 fit
    const r2 = new RateCounters(false);
    expect(r2.admit('k', 100, t0, 80, true)).toBeNull();
    // Ended in the next window: the refund goes to the window before, which still weighs on the estimate.
    r2.adjust('k', 10, -60, t0 + 60_000 + 1000);
    expect(r2.admit('k', 100, t0 + 60_000 + 2000, 75)).toBeNull(); // 20 weighted ≈ 20 + 75 ≤ 100
    // Two windows later it no longer counts: nothing to refund.
    const r3 = new RateCounters(true);
    expect(r3.admit('k', 100, t0, 80, true)).toBeNull();
    r3.adjust('k', 10, -60, t0 + 120_000 + 1000);
    expect(r3.collect(t0 + 120_000 + 2000).leftovers).toEqual([{ keyId: 'k', window: 10, delta: 80 }]);
    // With shared counters the ended window's refund is pushed with the leftovers.
    const r4 = new RateCounters(true);
    expect(r4.admit('k', 100, t0, 80, true)).toBeNull();
    r4.adjust('k', 10, -60, t0 + 60_000 + 1000);
    expect(r4.collect(t0 + 60_000 + 2000).leftovers).toEqual([
      { keyId: 'k', window: 10, delta: 80 },
      { keyId: 'k', window: 10, delta: -60 },
    ]);
  });

  it('shows headroom as admit sees it: used, when one more fits, when the window clears', () => {
    const r = new RateCounters(false);
    for (let i = 0; i < 3; i++) r.admit('k', 3, T + 1_000);
    const at = T + 3_000;
    const { prev, count } = r.peek('k', at);
    const full = rateUse(prev, count, 3, at);
    // The same wait a refusal gives, and a request admitted exactly then.
    expect(full).toEqual({ used: 3, freesInMs: 77_000, clearsInMs: 117_000 });
    expect(r.admit('k', 3, at)).toBe(77);
    expect(r.admit('k', 3, at + full.freesInMs)).toBeNull();
    // A minute on, only the weighted previous window is left; nothing counted clears nothing.
    const q = new RateCounters(false);
    for (let i = 0; i < 4; i++) q.admit('k', 4, T + 1_000);
    const later = q.peek('k', T + MIN + 30_000);
    expect(later).toEqual({ prev: 4, count: 0, pending: 0 });
    expect(rateUse(later.prev, later.count, 3, T + MIN + 30_000)).toEqual({
      used: 2,
      freesInMs: 0,
      clearsInMs: 30_000,
    });
    expect(q.peek('k', T + 3 * MIN)).toEqual({ prev: 0, count: 0, pending: 0 });
    expect(rateUse(0, 0, 3, T)).toEqual({ used: 0, freesInMs: 0, clearsInMs: 0 });
  });
});

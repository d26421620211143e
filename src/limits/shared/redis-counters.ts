/**
 * Shared limit counters in Redis: one integer per key and minute (requests) and per key and budget period
 * (nanodollars). Each sync adds this instance's pending deltas and reads the totals back, for all keys in
 * one pipeline (one round trip). The `{keyId}` hash tag keeps a key's counters in one Redis Cluster slot.
 */
import type { Redis } from 'ioredis';
import type { RateCounters, RateDelta } from '../local/rate.js';
import type { SpendDelta, SpendLedger } from '../local/spend.js';
import { MINUTE_MS } from '../periods.js';

// KEYS: this window, the window before. ARGV: delta, ttl ms. Returns both totals.
const RATE_SCRIPT = `
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local p = redis.call('GET', KEYS[2])
return {n, tonumber(p) or 0}`;

// KEYS: the period's total. ARGV: delta, seed, ttl ms. A missing total (first instance, or Redis lost its
// data) starts from the caller's whole estimate, which already holds the request log's spend.
const SPEND_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return tonumber(ARGV[2])`;

const RATE_TTL_MS = 3 * MINUTE_MS;
/** Kept a day past the period's end: an instance with a slow clock may still push into it. */
export const SPEND_GRACE_MS = 86_400_000;

export interface SharedCounters {
  /**
   * Per delta: [total of its window, total of the window before], or null where the push failed. `kind`
   * names the counter: requests (`rpm`) or tokens (`tpm`).
   */
  pushRate(deltas: readonly RateDelta[], kind?: RateKind): Promise<([number, number] | null)[]>;
  /** A key's totals of one window and of the one before, as every instance pushed them: [window, before]. */
  readRate(keyId: string, window: number, kind: RateKind): Promise<[number, number]>;
  /** Per delta: the period's total, or null where the push failed. */
  pushSpend(deltas: readonly SpendDelta[], now: number): Promise<(number | null)[]>;
}

export type RateKind = 'rpm' | 'tpm';
const rateKey = (keyId: string, window: number, kind: RateKind) =>
  `keyrelay:limits:${kind}:{${keyId}}:${window}`;
export const spendKey = (d: Pick<SpendDelta, 'keyId' | 'period' | 'start'>) =>
  `keyrelay:limits:spend:{${d.keyId}}:${d.period}:${d.start}`;

export function createRedisCounters(client: Redis): SharedCounters {
  async function run(build: (p: ReturnType<Redis['pipeline']>) => void, n: number) {
    if (n === 0) return [];
    const p = client.pipeline();
    build(p);
    try {
      return (await p.exec()) ?? Array.from({ length: n }, () => [new Error('no reply'), null] as const);
    } catch (err) {
      return Array.from({ length: n }, () => [err as Error, null] as const);
    }
  }
  return {
    async pushRate(deltas, kind = 'rpm') {
      const replies = await run((p) => {
        for (const d of deltas) {
          p.eval(
            RATE_SCRIPT,
            2,
            rateKey(d.keyId, d.window, kind),
            rateKey(d.keyId, d.window - 1, kind),
            d.delta,
            RATE_TTL_MS,
          );
        }
      }, deltas.length);
      return replies.map(([err, v]) => {
        if (err || !Array.isArray(v)) return null;
        return [Number(v[0]), Number(v[1])];
      });
    },
    async readRate(keyId, window, kind) {
      const [cur, prev] = await client.mget(rateKey(keyId, window, kind), rateKey(keyId, window - 1, kind));
      return [Number(cur ?? 0), Number(prev ?? 0)];
    },
    async pushSpend(deltas, now) {
      const replies = await run((p) => {
        for (const d of deltas) {
          p.eval(SPEND_SCRIPT, 1, spendKey(d), d.delta, d.seed, Math.max(1, d.end - now) + SPEND_GRACE_MS);
        }
      }, deltas.length);
      return replies.map(([err, v]) => (err || v === null ? null : Number(v)));
    },
  };
}

/**
 * One sync round of the limiter's counters: pushes this instance's pending tokens, requests and spend, in
 * that order, and adopts the totals read back. Returns whether a request or spend push failed (its deltas
 * went back to pending, for the next round).
 */
export async function syncCounters(
  shared: SharedCounters,
  rate: RateCounters,
  tpm: RateCounters,
  spend: SpendLedger,
  now: number,
): Promise<boolean> {
  const tokens = tpm.collect(now);
  if (tokens.leftovers.length > 0) await shared.pushRate(tokens.leftovers, 'tpm');
  const tokenTotals = await shared.pushRate(tokens.current, 'tpm');
  tokens.current.forEach((d, i) => {
    const t = tokenTotals[i];
    if (t) tpm.apply(d, t[0], t[1]);
    else tpm.restore(d);
  });
  const { current, leftovers } = rate.collect(now);
  const spent = spend.collect(now);
  // Ended windows first (once a minute), so the previous-window totals read next include them.
  if (leftovers.length > 0) await shared.pushRate(leftovers);
  const [rateTotals, spendTotals] = await Promise.all([
    shared.pushRate(current),
    shared.pushSpend(spent, now),
  ]);
  let failed = false;
  current.forEach((d, i) => {
    const t = rateTotals[i];
    if (t) rate.apply(d, t[0], t[1]);
    else {
      failed = true;
      rate.restore(d);
    }
  });
  spent.forEach((d, i) => {
    const t = spendTotals[i];
    if (t !== null && t !== undefined) spend.apply(d, t);
    else {
      failed = true;
      spend.restore(d);
    }
  });
  return failed;
}

/** How much of a key's requests- and tokens-per-minute limits is in use now: what the console and CLI show. */
import type { KeyRateStatus, KeyRecord, RateHeadroom } from '../store/types.js';
import { rateUse } from './local/rate.js';
import { MINUTE_MS } from './periods.js';
import type { RateKind, SharedCounters } from './shared/redis-counters.js';

/** A window's counts: the previous window's, the current one's, and what of it is not yet in Redis. */
export type WindowCounts = { prev: number; count: number; pending: number };

/**
 * The key's headroom, or null for a key without a rate limit. `local` gives this instance's counts; with
 * `shared` (Redis) every instance's totals are read as well, so a key this instance has not seen shows what
 * the others counted. A Redis that does not answer leaves this instance's counts.
 */
export async function readRateStatus(
  key: Pick<KeyRecord, 'id' | 'rate_limit_rpm' | 'rate_limit_tpm'>,
  now: number,
  local: (kind: RateKind) => WindowCounts,
  shared: Pick<SharedCounters, 'readRate'> | null,
): Promise<KeyRateStatus | null> {
  if (key.rate_limit_rpm == null && key.rate_limit_tpm == null) return null;
  const window = Math.floor(now / MINUTE_MS);
  async function one(kind: RateKind, limit: number | null): Promise<RateHeadroom | null> {
    if (limit == null) return null;
    let { prev, count } = local(kind);
    const { pending } = local(kind);
    if (shared) {
      try {
        const [total, prevTotal] = await shared.readRate(key.id, window, kind);
        count = Math.max(count, total + pending);
        prev = Math.max(prev, prevTotal);
      } catch {
        // Redis away: this instance's counts, which is also what it enforces meanwhile.
      }
    }
    const use = rateUse(prev, count, limit, now);
    const at = (ms: number) => (ms > 0 ? new Date(now + ms).toISOString() : null);
    return { used: use.used, limit, frees_at: at(use.freesInMs), clears_at: at(use.clearsInMs) };
  }
  const [rpm, tpm] = await Promise.all([one('rpm', key.rate_limit_rpm), one('tpm', key.rate_limit_tpm)]);
  return { rpm, tpm };
}

/** Counts for a reader with none of its own (the CLI): everything is in the shared totals. */
export const NO_LOCAL_COUNTS = (): WindowCounts => ({ prev: 0, count: 0, pending: 0 });

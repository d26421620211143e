/**
 * In-flight slots and hard-budget reservations taken from this instance's own counts: every hold when there
 * is no Redis, and the fallback while Redis fails (shared/holds.ts).
 */
import type { KeyRecord } from '../../store/types.js';
import { budgetRefusal, budgetWait, concurrencyRefusal } from '../refusals.js';
import type { Admission, Hold } from '../types.js';
import { toNanos } from './spend.js';

export class LocalHolds {
  /** In-flight slots held here, per key. */
  private readonly inflight = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  /** Takes the hold's slot and reservation, or refuses (and `undo`es what admission counted before). */
  admit(key: KeyRecord, hold: Hold, undo: () => void): Admission {
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

  /** Gives back what `admit` took. */
  release(hold: Hold): void {
    if (hold.slot) {
      const n = (this.inflight.get(hold.keyId) ?? 1) - 1;
      if (n <= 0) this.inflight.delete(hold.keyId);
      else this.inflight.set(hold.keyId, n);
    }
    if (hold.spend) hold.spend.reserved -= hold.nanos;
  }

  /** Requests in flight holding a slot here, per key. */
  inFlight(keyId: string): number {
    return this.inflight.get(keyId) ?? 0;
  }
}

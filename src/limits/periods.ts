/** Time windows of the limits: UTC calendar periods for budgets, one-minute windows for the rate limit. */
import type { BudgetPeriod } from '../store/types.js';

export const MINUTE_MS = 60_000;

/** Start (inclusive) and end (exclusive) of the UTC day or month containing `nowMs`, in epoch ms. */
export function periodBounds(period: BudgetPeriod, nowMs: number): { start: number; end: number } {
  const d = new Date(nowMs);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  if (period === 'day') {
    const start = Date.UTC(y, m, d.getUTCDate());
    return { start, end: start + 86_400_000 };
  }
  return { start: Date.UTC(y, m, 1), end: Date.UTC(y, m + 1, 1) };
}

/** Seconds from now until `untilMs`, rounded up, at least 1 (a `retry-after` of 0 invites a busy loop). */
export function secondsUntil(untilMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((untilMs - nowMs) / 1000));
}

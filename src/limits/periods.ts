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

/** A wait as people say it: "45 s", "3 min 20 s", "15 h 6 min", "2 d 4 h" (the two largest units). */
export function waitInWords(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  const units: [string, number][] = [
    ['d', 86_400],
    ['h', 3_600],
    ['min', 60],
    ['s', 1],
  ];
  const first = units.findIndex(([, size]) => s >= size);
  if (first < 0) return '0 s';
  const parts: string[] = [];
  let rest = s;
  for (const [name, size] of units.slice(first, first + 2)) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0) parts.push(`${n} ${name}`);
  }
  return parts.join(' ');
}

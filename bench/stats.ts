import type { Summary } from './protocol.js';

/** Nearest-rank percentile of an ascending-sorted array. */
function pick(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

export function summarize(values: ArrayLike<number>, count = values.length): Summary {
  const sorted = Float64Array.from({ length: count }, (_, i) => values[i]!).sort();
  return {
    n: count,
    p50: pick(sorted, 0.5),
    p90: pick(sorted, 0.9),
    p99: pick(sorted, 0.99),
    max: count ? sorted[count - 1]! : NaN,
  };
}

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

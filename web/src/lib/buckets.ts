import type { UsagePoint, UsageSplitPoint } from '../api.js';

export type Bucket = 'minute' | 'hour' | 'day';

export const USAGE_RANGES = {
  '1h': { label: '1h', ms: 3600_000, bucket: 'minute' },
  '24h': { label: '24h', ms: 86_400_000, bucket: 'hour' },
  '7d': { label: '7d', ms: 7 * 86_400_000, bucket: 'hour' },
  '30d': { label: '30d', ms: 30 * 86_400_000, bucket: 'day' },
} as const satisfies Record<string, { label: string; ms: number; bucket: Bucket }>;

export type UsageRange = keyof typeof USAGE_RANGES;

/** The bucket for a custom range: fine enough to see its shape, coarse enough to stay a readable chart. */
export function bucketFor(ms: number): Bucket {
  if (ms <= 3 * 3600_000) return 'minute';
  if (ms <= 14 * 86_400_000) return 'hour';
  return 'day';
}

const STEP: Record<Bucket, number> = { minute: 60_000, hour: 3600_000, day: 86_400_000 };

function floorTo(t: number, bucket: Bucket): number {
  return Math.floor(t / STEP[bucket]) * STEP[bucket];
}

const EMPTY: Omit<UsagePoint, 'bucket'> = {
  requests: 0,
  errors: 0,
  input_tokens: 0,
  output_tokens: 0,
  cache_read_tokens: 0,
  cost_usd: 0,
  unknown_cost_requests: 0,
  partial_cost_requests: 0,
  latency_p50_ms: null,
  latency_p95_ms: null,
};

export interface ChartPoint extends Omit<UsagePoint, 'bucket'> {
  t: number;
}

/** The server returns only buckets with traffic; charts read better with the quiet buckets as zeros. */
export function fillBuckets(points: UsagePoint[], from: number, to: number, bucket: Bucket): ChartPoint[] {
  const byTime = new Map(points.map((p) => [floorTo(Date.parse(p.bucket), bucket), p]));
  const out: ChartPoint[] = [];
  for (let t = floorTo(from, bucket); t <= to; t += STEP[bucket]) {
    const p = byTime.get(t);
    out.push({ ...EMPTY, ...(p ?? {}), t });
    byTime.delete(t);
  }
  // Anything the server bucketed differently (e.g. a local-midnight day) is still shown, not dropped.
  for (const [t, p] of byTime) out.push({ ...EMPTY, ...p, t });
  return out.sort((a, b) => a.t - b.t);
}

export function formatTick(t: number, bucket: Bucket, rangeMs: number): string {
  const d = new Date(t);
  if (bucket === 'day' || rangeMs > 2 * 86_400_000) {
    return d.toLocaleDateString('en-US', { month: 'short', day: 'numeric' });
  }
  return d.toLocaleTimeString('en-US', { hour: '2-digit', minute: '2-digit', hour12: false });
}

/**
 * A split series (one point per bucket and group) as chart rows: a value per group key for every bucket of
 * the range, quiet buckets as zeros. Group keys are positional (g0, g1, …; `other` for the rest), so any
 * group name is safe as a data key.
 */
export function splitRows(
  points: UsageSplitPoint[],
  names: string[],
  value: (p: UsageSplitPoint) => number,
  from: number,
  to: number,
  bucket: Bucket,
): ({ t: number } & Record<string, number>)[] {
  const keyOf = new Map(names.map((n, i) => [n, `g${i}`]));
  const rows = new Map<number, { t: number } & Record<string, number>>();
  const blank = (t: number) => {
    const row: { t: number } & Record<string, number> = { t };
    for (const k of keyOf.values()) row[k] = 0;
    row.other = 0;
    return row;
  };
  for (let t = floorTo(from, bucket); t <= to; t += STEP[bucket]) rows.set(t, blank(t));
  for (const p of points) {
    const t = floorTo(Date.parse(p.bucket), bucket);
    const row = rows.get(t) ?? blank(t);
    rows.set(t, row);
    const key = p.group === null ? 'other' : (keyOf.get(p.group) ?? 'other');
    row[key] = (row[key] ?? 0) + value(p);
  }
  return [...rows.values()].sort((a, b) => a.t - b.t);
}

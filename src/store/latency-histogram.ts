/**
 * Latency histograms, as the daily usage rollup keeps them (usage-rollup.ts): buckets on a log scale, stored
 * as text, merged by bucket, and read back as percentiles.
 */

/**
 * Latency buckets are 4 % wide on a log scale: a bucket's middle is within 2 % of any latency in it, and a
 * busy rollup row's histogram holds ~100 buckets (200 ms to 10 s), which a month's read merges by the
 * thousand.
 */
const LN_GROWTH = Math.log(1.04);
/** The bucket of a latency of 0: below any a positive latency falls in. */
const ZERO_BUCKET = -100_000;

/** A row's latency bucket in SQL, the same on both stores (SQLite's math functions, PostgreSQL's ln). */
export const LATENCY_BUCKET_SQL = `CASE WHEN latency_ms > 0
  THEN CAST(floor(ln(latency_ms) / ${LN_GROWTH}) AS INTEGER) ELSE ${ZERO_BUCKET} END`;

/** A latency's bucket in JS, as LATENCY_BUCKET_SQL computes it. */
export function latencyBucket(ms: number): number {
  return ms > 0 ? Math.floor(Math.log(ms) / LN_GROWTH) : ZERO_BUCKET;
}

function bucketValue(b: number): number {
  return b === ZERO_BUCKET ? 0 : Math.exp((b + 0.5) * LN_GROWTH);
}

/** Bucket → count. Stored as text: `bucket:count` pairs joined by commas (a read's may repeat a bucket). */
export type Histogram = Map<number, number>;

/** Adds a histogram's text to `h`, each count times `sign`. Read character by character: a month's read parses ~1 MB. */
export function addHistogramText(h: Histogram, text: string | null | undefined, sign = 1): void {
  if (!text) return;
  let bucket = 0;
  let n = 0;
  let negative = false;
  let inCount = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 44;
    if (c === 44 /* , */) {
      const b = negative ? -bucket : bucket;
      h.set(b, (h.get(b) ?? 0) + sign * n);
      bucket = 0;
      n = 0;
      negative = false;
      inCount = false;
    } else if (c === 58 /* : */) inCount = true;
    else if (c === 45 /* - */) negative = true;
    else if (inCount) n = n * 10 + (c - 48);
    else bucket = bucket * 10 + (c - 48);
  }
}

export function histogramText(h: Histogram): string {
  return [...h.entries()]
    .filter(([, n]) => n !== 0)
    .sort((a, b) => a[0] - b[0])
    .map(([b, n]) => `${b}:${n}`)
    .join(',');
}

/** Two histogram texts as one, each bucket once: SQLite's usage_latency_merge (PostgreSQL has its own in SQL). */
export function mergeHistogramTexts(a: string | null, b: string | null): string {
  const h: Histogram = new Map();
  addHistogramText(h, a);
  addHistogramText(h, b);
  return histogramText(h);
}

/**
 * percentile_cont at each of `ps` over the histogram, each latency taken as its bucket's middle. One sort for
 * all of them: a month's breakdown by session computes them for tens of thousands of groups.
 */
export function histogramPercentiles(h: Histogram, ps: readonly number[]): Array<number | null> {
  const buckets: number[] = [];
  for (const [b, n] of h) if (n > 0) buckets.push(b);
  if (buckets.length === 0) return ps.map(() => null);
  buckets.sort((x, y) => x - y);
  const below: number[] = [];
  let total = 0;
  for (const b of buckets) below.push((total += h.get(b)!));
  const at = (rank: number): number => {
    let i = 0;
    while (below[i]! <= rank) i++;
    return bucketValue(buckets[i]!);
  };
  return ps.map((p) => {
    const pos = p * (total - 1);
    const lo = Math.floor(pos);
    const a = at(lo);
    return lo === pos ? a : a + (at(Math.ceil(pos)) - a) * (pos - lo);
  });
}

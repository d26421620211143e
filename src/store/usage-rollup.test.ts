import { describe, expect, it } from 'vitest';
import {
  addHistogramText,
  histogramPercentiles,
  latencyBucket,
  mergeHistogramTexts,
  type Histogram,
} from './latency-histogram.js';
import { planRollup, rollupDays, ROLLUP_COVERS_ALL } from './usage-rollup.js';

describe('usage rollup histograms', () => {
  it('merges texts bucket by bucket, negative buckets and repeats included', () => {
    expect(mergeHistogramTexts('-3:2,5:1', '5:4,7:1,-3:1')).toBe('-3:3,5:5,7:1');
    expect(mergeHistogramTexts(null, '1:1')).toBe('1:1');
  });

  it('puts each percentile within 2 % of the exact one, and 0 ms at 0', () => {
    const latencies = Array.from({ length: 1000 }, (_, i) => 37 + ((i * 7919) % 8000));
    const h: Histogram = new Map();
    for (const ms of latencies) h.set(latencyBucket(ms), (h.get(latencyBucket(ms)) ?? 0) + 1);
    const sorted = [...latencies].sort((a, b) => a - b);
    const exact = (p: number) => {
      const pos = p * (sorted.length - 1);
      const lo = Math.floor(pos);
      return sorted[lo]! + (sorted[Math.ceil(pos)]! - sorted[lo]!) * (pos - lo);
    };
    const [p50, p95] = histogramPercentiles(h, [0.5, 0.95]);
    expect(Math.abs(p50! / exact(0.5) - 1)).toBeLessThan(0.02);
    expect(Math.abs(p95! / exact(0.95) - 1)).toBeLessThan(0.02);
    const zero: Histogram = new Map();
    addHistogramText(zero, `${latencyBucket(0)}:3`);
    expect(histogramPercentiles(zero, [0.5])).toEqual([0]);
    expect(histogramPercentiles(new Map(), [0.5])).toEqual([null]);
  });
});

describe('which reads the rollup answers', () => {
  it('keeps key filters to the dimensions kept per key, and a value filter to its own dimension', () => {
    expect(planRollup({ org_id: 'o', key_id: 'k' }, { kind: 'breakdown', by: 'model' })).toEqual({
      dim: 'model',
      group: 'value',
    });
    expect(planRollup({ org_id: 'o', key_id: 'k' }, { kind: 'breakdown', by: 'end_user' })).toBeNull();
    expect(planRollup({ org_id: 'o', end_user: 'u' }, { kind: 'series' })).toEqual({
      dim: 'end_user',
      group: 'day',
      value: 'u',
    });
    expect(planRollup({ org_id: 'o', end_user: '' }, { kind: 'series' })).toBeNull();
    expect(planRollup({ org_id: 'o', model: 'm' }, { kind: 'series' })).toBeNull();
    expect(planRollup({ org_id: 'o', search: 'x' }, { kind: 'series' })).toBeNull();
    expect(planRollup({ account_id: 'a' }, { kind: 'breakdown', by: { property: 'team' } })).toEqual({
      dim: 'p:team',
      group: 'value',
      property: true,
    });
  });

  it('cuts a range at whole covered days, the rest left to the rows', () => {
    const f = { org_id: 'o', from: '2026-05-10T06:00:00.000Z', to: '2026-05-14T12:00:00.000Z' };
    expect(rollupDays(f, ROLLUP_COVERS_ALL)).toEqual({
      from: '2026-05-11',
      to: '2026-05-14',
      edges: [
        { ...f, to: '2026-05-11T00:00:00.000Z' },
        { ...f, from: '2026-05-14T00:00:00.000Z' },
      ],
    });
    expect(rollupDays(f, '2026-05-13')).toMatchObject({ from: '2026-05-13', to: '2026-05-14' });
    expect(rollupDays(f, '2026-05-14')).toBeNull();
    expect(rollupDays({ org_id: 'o' }, ROLLUP_COVERS_ALL)).toEqual({ edges: [] });
    expect(rollupDays({ org_id: 'o' }, '2026-05-13')).toEqual({
      from: '2026-05-13',
      edges: [{ org_id: 'o', to: '2026-05-13T00:00:00.000Z' }],
    });
  });
});

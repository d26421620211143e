/** A view's time range from its address: one of the usage presets (`range=7d`), resolved when loaded. */
import { USAGE_RANGES, type Bucket, type UsageRange } from './buckets.js';

export const RANGE_ITEMS = Object.entries(USAGE_RANGES).map(([id, r]) => ({ id, label: r.label }));

export function readRange(query: URLSearchParams, fallback: UsageRange): UsageRange {
  const v = query.get('range');
  return v && v in USAGE_RANGES ? (v as UsageRange) : fallback;
}

/** The range as the API takes it, ending now. */
export function resolveRange(range: UsageRange): { from: string; to: string; bucket: Bucket; ms: number } {
  const r = USAGE_RANGES[range];
  const to = Date.now();
  return {
    from: new Date(to - r.ms).toISOString(),
    to: new Date(to).toISOString(),
    bucket: r.bucket,
    ms: r.ms,
  };
}

/** The address with one parameter set (or, with undefined or '', removed). */
export function withParam(pathname: string, query: URLSearchParams, name: string, value?: string): string {
  const qs = new URLSearchParams(query);
  if (value) qs.set(name, value);
  else qs.delete(name);
  const s = qs.toString();
  return s ? `${pathname}?${s}` : pathname;
}

/** "12.3 s", "4 min 5 s", "1 h 2 min": how long a run took. */
export function formatDuration(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** A call's offset from its session's start: "+0:00.0", "+1:05.3", "+1:02:03". */
export function formatOffset(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h > 0) return `+${h}:${String(m).padStart(2, '0')}:${String(Math.floor(sec)).padStart(2, '0')}`;
  return `+${m}:${sec.toFixed(1).padStart(4, '0')}`;
}

import type { RateHeadroom } from '../api.js';
import { formatDateTime, formatWaitShort } from '../lib/format.js';

/**
 * A requests- or tokens-per-minute limit as it stands: used of the limit in the last minute, a bar, and
 * when it frees (while full: when one more fits; else when all of it is free again).
 */
export function RateMeter({ unit, r, now }: { unit: 'rpm' | 'tpm'; r: RateHeadroom; now: number }) {
  const share = r.limit > 0 ? Math.min(1, r.used / r.limit) : 1;
  const label = `${r.used.toLocaleString('en-US')} of ${r.limit.toLocaleString('en-US')} ${unit}`;
  const tone = share >= 1 ? 'full' : share >= 0.8 ? 'high' : 'ok';
  const wait = (at: string) => formatWaitShort((Date.parse(at) - now) / 1000);
  const when = r.frees_at
    ? { at: r.frees_at, text: `full, next in ${wait(r.frees_at)}` }
    : r.clears_at
      ? { at: r.clears_at, text: `all free in ${wait(r.clears_at)}` }
      : null;
  return (
    <span className="budget-meter" data-testid={`${unit}-meter`}>
      <span className="budget-label">{label}</span>
      <span
        className={`budget-bar budget-${tone}`}
        role="meter"
        aria-label={`${unit === 'rpm' ? 'Requests' : 'Tokens'} in the last minute: ${label}`}
        aria-valuemin={0}
        aria-valuemax={r.limit}
        aria-valuenow={Math.min(r.used, r.limit)}
      >
        <span style={{ width: `${(share * 100).toFixed(1)}%` }} />
      </span>
      {when && (
        <span className="muted small" title={formatDateTime(when.at)}>
          {when.text}
        </span>
      )}
    </span>
  );
}

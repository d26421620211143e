import type { KeyBudgetStatus, KeyView } from '../api.js';
import { formatCost, formatDateTime, formatWaitShort } from '../lib/format.js';
import { formatBudget } from '../lib/limits.js';

/** A budget as it stands: spent of budget, a bar, and when the period resets. */
export function BudgetMeter({
  k,
  b,
  now,
}: {
  /** A key's budget, or a member's across their keys. */
  k: Pick<KeyView, 'budget_period' | 'budget_mode'>;
  b: KeyBudgetStatus;
  now: number;
}) {
  const share = b.budget_usd > 0 ? Math.min(1, b.spent_usd / b.budget_usd) : 1;
  const period = k.budget_period ?? 'month';
  const label = `${formatCost(b.spent_usd)} of ${formatBudget(b.budget_usd)}/${period}${k.budget_mode === 'hard' ? ' (hard)' : ''}`;
  const tone = share >= 1 ? 'full' : share >= 0.8 ? 'high' : 'ok';
  return (
    <span className="budget-meter" data-testid="budget-meter">
      <span className="budget-label">{label}</span>
      <span
        className={`budget-bar budget-${tone}`}
        role="meter"
        aria-label={`Budget spent: ${label}`}
        aria-valuemin={0}
        aria-valuemax={b.budget_usd}
        aria-valuenow={Math.min(b.spent_usd, b.budget_usd)}
      >
        <span style={{ width: `${(share * 100).toFixed(1)}%` }} />
      </span>
      <span className="muted small" title={formatDateTime(b.resets_at)}>
        resets in {formatWaitShort((Date.parse(b.resets_at) - now) / 1000)}
      </span>
    </span>
  );
}

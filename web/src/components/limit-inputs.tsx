/** The inputs a limits form is made of: a whole-number limit, a budget row, a field's error. */
import type { BudgetMode, BudgetPeriod } from '../lib/limits.js';

export function FieldError({ id, message }: { id: string; message: string | undefined }) {
  if (!message) return null;
  return (
    <span id={id} className="form-error small" role="alert">
      {message}
    </span>
  );
}

/** A whole-number limit (per minute, at once): empty means no limit. */
export function CountInput({
  id,
  value,
  invalid,
  onChange,
}: {
  id: string;
  value: string;
  invalid: boolean;
  onChange: (value: string) => void;
}) {
  return (
    <input
      id={id}
      className="input-short"
      type="number"
      inputMode="numeric"
      min={1}
      step={1}
      value={value}
      placeholder="No limit"
      aria-describedby={`${id}-hint`}
      aria-invalid={invalid ? true : undefined}
      onChange={(e) => onChange(e.target.value)}
    />
  );
}

/** A budget's amount (USD), period and mode on one row; the period and mode wait for an amount. */
export function BudgetRow({
  id,
  labels,
  amount,
  period,
  mode,
  invalid,
  onChange,
}: {
  /** The amount input's id; the period and mode selects' ids are given too, the hint's is `${id}-hint`. */
  id: { amount: string; period: string; mode: string };
  /** What a screen reader calls the two selects. */
  labels: { period: string; mode: string };
  amount: string;
  period: BudgetPeriod;
  mode: BudgetMode;
  invalid: boolean;
  onChange: (patch: { amount?: string; period?: BudgetPeriod; mode?: BudgetMode }) => void;
}) {
  const set = amount.trim() !== '';
  return (
    <div className="budget-row">
      <span className="input-prefix">
        <span aria-hidden="true">$</span>
        <input
          id={id.amount}
          type="number"
          inputMode="decimal"
          min={0.01}
          step={0.01}
          value={amount}
          placeholder="No budget"
          aria-describedby={`${id.amount}-hint`}
          aria-invalid={invalid ? true : undefined}
          onChange={(e) => onChange({ amount: e.target.value })}
        />
      </span>
      <label className="sr-only" htmlFor={id.period}>
        {labels.period}
      </label>
      <select
        id={id.period}
        value={period}
        disabled={!set}
        onChange={(e) => onChange({ period: e.target.value as BudgetPeriod })}
      >
        <option value="day">per day</option>
        <option value="month">per month</option>
      </select>
      <label className="sr-only" htmlFor={id.mode}>
        {labels.mode}
      </label>
      <select
        id={id.mode}
        value={mode}
        disabled={!set}
        onChange={(e) => onChange({ mode: e.target.value as BudgetMode })}
      >
        <option value="soft">soft</option>
        <option value="hard">hard</option>
      </select>
    </div>
  );
}

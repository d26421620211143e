/**
 * Sets keyrelay's logged cost for a day beside the provider's bill, per model, and names the likely reason
 * for each difference. The difference is the bill minus keyrelay's cost: above zero, the provider charged
 * for more than keyrelay saw or priced; below zero, keyrelay counted more than was billed.
 */
import type { LoggedCostRow } from '../store/types.js';
import type { BillingProvider } from './admin-keys.js';
import type { BillLine } from './cost-report.js';

/** Differences up to half a cent are rounding between the provider's amounts and the price library's. */
export const AGREE_USD = 0.005;

export interface ModelDrift {
  /** The model as keyrelay's rows name it, else as the bill does; null: bill lines tied to no model. */
  model: string | null;
  keyrelay: {
    requests: number;
    input_tokens: number;
    output_tokens: number;
    cost_usd: number;
    unpriced_requests: number;
    partial_requests: number;
  };
  /** What the provider billed for the model, and the line items it is made of. */
  provider: { cost_usd: number; items: Array<{ item: string; cost_usd: number }> };
  /** provider.cost_usd − keyrelay.cost_usd. */
  difference_usd: number;
  agrees: boolean;
  reasons: string[];
}

export interface ProviderReconciliation {
  provider: BillingProvider;
  /** Null when the report was read; else why it was not (the rest of the answer still stands). */
  error: string | null;
  keyrelay_cost_usd: number;
  provider_cost_usd: number | null;
  difference_usd: number | null;
  agrees: boolean | null;
  models: ModelDrift[];
}

/** Dated snapshots bill under their date ("gpt-4o-mini-2024-07-18", "claude-sonnet-4-20250514"). */
const DATE_SUFFIX = /-(\d{4}-\d{2}-\d{2}|\d{8})$/;
const baseName = (model: string) => model.replace(DATE_SUFFIX, '');
const round = (n: number) => Math.round(n * 1e6) / 1e6;

/**
 * Joins rows and bill lines by model: the same name, else the same name without a date suffix, so rows
 * logged under an alias ("gpt-4o-mini") meet the snapshot the provider bills ("gpt-4o-mini-2024-07-18").
 */
export function compareDay(
  provider: BillingProvider,
  rows: readonly LoggedCostRow[],
  bill: readonly BillLine[],
  finalReport: boolean,
): ProviderReconciliation {
  const drifts = new Map<string, ModelDrift>();
  const entry = (model: string | null): ModelDrift => {
    const key = model === null ? '\u0000' : baseName(model);
    let d = drifts.get(key);
    if (!d) {
      d = {
        model,
        keyrelay: {
          requests: 0,
          input_tokens: 0,
          output_tokens: 0,
          cost_usd: 0,
          unpriced_requests: 0,
          partial_requests: 0,
        },
        provider: { cost_usd: 0, items: [] },
        difference_usd: 0,
        agrees: true,
        reasons: [],
      };
      drifts.set(key, d);
    }
    return d;
  };
  for (const r of rows) {
    const d = entry(r.model);
    d.keyrelay.requests += r.requests;
    d.keyrelay.input_tokens += r.input_tokens;
    d.keyrelay.output_tokens += r.output_tokens;
    d.keyrelay.cost_usd += r.cost_usd;
    d.keyrelay.unpriced_requests += r.unpriced_requests;
    d.keyrelay.partial_requests += r.partial_requests;
  }
  for (const line of bill) {
    const d = entry(line.model);
    d.provider.cost_usd += line.cost_usd;
    d.provider.items.push({ item: line.item, cost_usd: round(line.cost_usd) });
  }
  const models = [...drifts.values()].map((d) => {
    d.keyrelay.cost_usd = round(d.keyrelay.cost_usd);
    d.provider.cost_usd = round(d.provider.cost_usd);
    d.difference_usd = round(d.provider.cost_usd - d.keyrelay.cost_usd);
    d.agrees = Math.abs(d.difference_usd) <= AGREE_USD && d.keyrelay.unpriced_requests === 0;
    d.reasons = reasonsFor(d, finalReport);
    return d;
  });
  models.sort((a, b) => Math.abs(b.difference_usd) - Math.abs(a.difference_usd));
  const keyrelay = round(models.reduce((s, d) => s + d.keyrelay.cost_usd, 0));
  const billed = round(models.reduce((s, d) => s + d.provider.cost_usd, 0));
  const difference = round(billed - keyrelay);
  return {
    provider,
    error: null,
    keyrelay_cost_usd: keyrelay,
    provider_cost_usd: billed,
    difference_usd: difference,
    agrees: models.every((d) => d.agrees) && Math.abs(difference) <= AGREE_USD,
    models,
  };
}

function reasonsFor(d: ModelDrift, finalReport: boolean): string[] {
  const reasons: string[] = [];
  const k = d.keyrelay;
  if (k.unpriced_requests > 0)
    reasons.push(
      `${k.unpriced_requests} unpriced call(s): keyrelay has no price for them, so their cost is missing here (see "keyrelay prices")`,
    );
  if (k.partial_requests > 0)
    reasons.push(
      `${k.partial_requests} partial call(s): a fee without a price is left out of keyrelay's cost`,
    );
  if (Math.abs(d.difference_usd) <= AGREE_USD) return reasons;
  if (d.model === null) {
    reasons.push(
      'billed items tied to no model (tools, storage, other products): keyrelay logs calls by model',
    );
  } else if (d.difference_usd > 0) {
    if (k.requests === 0)
      reasons.push('no call to this model passed through keyrelay: traffic that bypassed keyrelay');
    else
      reasons.push(
        'billed more than keyrelay logged: calls that did not pass through keyrelay, or a rate the price library does not know (priority, regional)',
      );
  } else if (d.provider.cost_usd === 0) {
    reasons.push(
      "nothing billed for calls keyrelay logged: they used a credential of another provider organization than the admin key's",
    );
  } else {
    reasons.push(
      "keyrelay counted more than was billed: calls on another provider organization's credential, or a discount (batch, flex) the price library does not apply",
    );
  }
  if (!finalReport) reasons.push("the provider's report for this day may not be final yet");
  return reasons;
}

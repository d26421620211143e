/**
 * How a cost was made, part by part, from the same price entry and the same arithmetic that priced it
 * (flat-price.ts): each part's quantity, the rate it took (a long-context tier's where the request passed
 * it) and its cost, the tool fees without a price, and those the provider bills nothing for.
 */
import { createRequire } from 'node:module';
import type * as GenaiPrices from '@pydantic/genai-prices';
import { libraryToolPriceKey, libraryUsage, PRICE_SOURCE, type FreeToolFees } from './cost.js';
import { flatParts, flatPlan } from './flat-price.js';
import type { Usage } from './types.js';

const require = createRequire(import.meta.url);
const { calcPrice } = require('@pydantic/genai-prices') as typeof GenaiPrices;

export interface CostLine {
  /** The library's price key (`input_mtok`, `web_searches_kcount`…) or, for a fee without one, the fee. */
  part: string;
  quantity: number;
  /** USD per `per` units; null where no price is known. */
  rate: number | null;
  per: number;
  cost: number | null;
  /** The input token count past which the tier's rate applied, when it did. */
  tier_start: number | null;
  note: string | null;
}

export interface CostBreakdown {
  /** The library's model entry the usage was priced at. */
  price_model: string;
  price_source: string;
  lines: CostLine[];
  total: number;
}

/** Tolerance between the parts' sum and the stored cost: the same arithmetic, summed in another order. */
const SAME_COST = 1e-9;

/**
 * The parts of `usage`'s cost at the price in force at `at`, or null where the parts cannot be shown (a
 * price only the library's general path handles, or usage without tokens). `expected`: the cost on the
 * row; parts that do not add up to it are not shown (the row was priced from usage it does not keep).
 */
export function explainUsageCost(
  providerId: string,
  model: string,
  usage: Usage,
  freeFees: FreeToolFees,
  at: Date,
  expected: number,
): CostBreakdown | null {
  const lib = libraryUsage(usage, freeFees);
  if (typeof lib === 'string') return null;
  let probe: GenaiPrices.PriceCalculation | null;
  try {
    probe = calcPrice(lib.priced, model, { providerId, timestamp: at });
  } catch {
    return null;
  }
  if (!probe) return null;
  const plan = flatPlan({ ...probe.model, prices: probe.model_price });
  const parts = plan ? flatParts(plan, lib.priced) : undefined;
  if (!parts) return null;
  const lines: CostLine[] = parts
    .filter((p) => p.quantity > 0 || p.priceKey === 'requests_kcount')
    .map((p) => ({
      part: p.priceKey,
      quantity: p.quantity,
      rate: p.rate,
      per: p.per,
      cost: p.cost,
      tier_start: p.tierStart,
      note: null,
    }));
  const unpricedFee = (fee: string, count: number): CostLine => ({
    part: fee,
    quantity: count,
    rate: null,
    per: 1,
    cost: null,
    tier_start: null,
    note: `${PRICE_SOURCE} has no price for it: left out of the cost`,
  });
  for (const fee of lib.libraryFees)
    if (probe.model_price[libraryToolPriceKey(fee)!] == null) lines.push(unpricedFee(fee, lib.priced[fee]!));
  for (const [fee, count] of lib.missing) lines.push(unpricedFee(fee, count));
  for (const [fee, count] of lib.free)
    lines.push({
      part: fee,
      quantity: count,
      rate: 0,
      per: 1,
      cost: 0,
      tier_start: null,
      note: `billed as tokens only: ${freeFees[fee]}`,
    });
  const total = lines.reduce((sum, l) => sum + (l.cost ?? 0), 0);
  if (Math.abs(total - expected) > SAME_COST * Math.max(1, expected)) return null;
  return { price_model: probe.model.id, price_source: PRICE_SOURCE, lines, total };
}

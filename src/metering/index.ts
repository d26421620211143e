/**
 * Where a request's provider meets the usage layer: the provider's endpoint table picks the reader a
 * response is read with, its `endUser` reads the body, its price id prices the usage. Above both
 * src/usage/ (which knows no provider) and src/providers/ (which implement the usage layer's readers); the
 * proxy, limits and the server take usage and cost from here.
 */
import { endpointOf, providerModule, type Provider } from '../providers/index.js';
import type { RequestInfo } from './request-info.js';
import {
  askForStreamUsage,
  createResponseTap as tapResponse,
  priceUsage,
  type ResponseTap,
  type TapOptions,
  type Usage,
} from '../usage/index.js';

export { parseRequestInfo, readRequestInfo, type RequestInfo } from './request-info.js';
export { BatchInputReader } from './batch-input.js';
export { BatchResultsReader, type BatchTotals } from './batch-results.js';
export { NOT_BILLED, priceRow, type Priced } from './price-row.js';
export { explainRowCost } from './cost-breakdown.js';
export { formatPricingGaps, summarizePricingGaps, type PricingGaps } from './pricing-gaps.js';

/** Reads usage from the response as it passes, with the reader the provider's endpoint table names. */
export function createResponseTap(
  info: RequestInfo,
  res: { status: number; headers: Record<string, string | string[] | undefined> },
  opts: TapOptions,
): ResponseTap {
  return tapResponse(info, endpointOf(info.provider, info.path).usage, res, opts);
}

/** The body to send instead (asking a stream for its usage) where the endpoint's row says so, else null. */
export function injectStreamUsage(info: RequestInfo, body: Buffer): Buffer | null {
  return info.stream && endpointOf(info.provider, info.path).injectStreamUsage
    ? askForStreamUsage(info, body)
    : null;
}

/** The cost of a usage at the provider's prices (genai-prices' entry for it). */
export function computeCost(
  provider: Provider,
  model: string | null,
  usage: Usage,
): { cost_usd: number | null; price_source: string | null } {
  const m = providerModule(provider);
  const priced = priceUsage(m.priceProviderId, model, usage, m.freeToolFees);
  if (priced.cost_usd !== null || !model || !m.priceAs) return priced;
  const as = m.priceAs(model);
  if (!as) return priced;
  const mapped = priceUsage(as.priceProviderId, as.model, usage, m.freeToolFees);
  return mapped.cost_usd === null ? priced : mapped;
}

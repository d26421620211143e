/**
 * The usage layer: what a request asks (parseRequestInfo), what its response used (createResponseTap), what
 * it cost (computeCost), and the one change to a request body (injectStreamUsage + createUsageStripper).
 * What differs per provider and endpoint comes from src/providers/.
 *
 * Decisions: input_tokens counts every prompt token (Anthropic: input + cache writes + cache reads). An
 * error or redirect response bills nothing: usage `none`, tokens null. A stream whose final usage never
 * came is `partial` if some provider usage came (Anthropic message_start; output then is the larger of the
 * reported and the streamed-text count), else `estimated` (o200k tokenizer over the request's prompt
 * fields and the text seen). Non-token endpoints (models, files, count_tokens, batches…) are `none`; how
 * each row is priced, and why a cost is unknown, is `price_source` (price-row.ts, docs/pricing.md).
 * Usage.model is the model the response named (null if none): callers fall back to the request's.
 */
export type { RequestInfo, ResponseTap, Usage } from './types.js';
export { parseRequestInfo } from './request-info.js';
export { createResponseTap } from './response-tap.js';
export {
  injectStreamUsage,
  createIdentityUsageStripper,
  createUsageStripper,
  type BodyRewrite,
} from './stream-usage.js';
export { isCompressed, isDecodableEncoding } from './decoder.js';
export { computeCost, PRICE_SOURCE, unpriced } from './cost.js';
export { NOT_BILLED, priceRow } from './price-row.js';

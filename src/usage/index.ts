/**
 * The usage layer: what a request body asks (parseRequest), what its response used (createResponseTap, with
 * the endpoint's UsageReader), what it cost (priceUsage), and the one change to a request body
 * (askForStreamUsage + createUsageStripper). It knows no provider: the provider modules (src/providers/)
 * implement its readers, and src/metering/ joins a request's provider to them and to its prices. Everything
 * outside this directory imports it from here.
 *
 * Decisions: input_tokens counts every prompt token (Anthropic: input + cache writes + cache reads). An
 * error or redirect response bills nothing: usage `none`, tokens null. A stream whose final usage never
 * came is `partial` if some provider usage came (Anthropic message_start; output then is the larger of the
 * reported and the streamed-text count), else `estimated` (o200k tokenizer over the request's prompt
 * fields and the text seen). Non-token endpoints (models, files, count_tokens, batches…) are `none`; how
 * each row is priced, and why a cost is unknown, is `price_source` (metering/price-row.ts, docs/pricing.md).
 * Usage.model is the model the response named (null if none): callers fall back to the request's.
 */
export type {
  ParsedRequest,
  Reported,
  ResponseTap,
  SseEventReader,
  TokenCounts,
  Usage,
  UsageReader,
  UsageSource,
  BatchWork,
  ToolFee,
  ToolUses,
} from './types.js';
export { isUpload, parseRequest, str, type EndUserOf } from './request-info.js';
export { readMultipartFields } from './multipart.js';
export { createResponseTap, type TapOptions } from './response-tap.js';
export {
  askForStreamUsage,
  createIdentityUsageStripper,
  createUsageStripper,
  type BodyRewrite,
} from './stream-usage.js';
export { createBodyDecoder, isCompressed, isDecodableEncoding } from './decoder.js';
export {
  missingFees,
  PARTIAL,
  priceBatchUsage,
  priceUsage,
  PRICE_SOURCE,
  unpriced,
  type FreeToolFees,
} from './cost.js';
export { explainUsageCost, type CostBreakdown, type CostLine } from './cost-breakdown.js';
export { addStringFields } from './stream-reader.js';
export {
  addAnthropicBlockText,
  addDeltaText,
  countTextTokens,
  OutputCounter,
  SKIP_KEYS,
} from './estimate.js';
export {
  findUsageObject,
  finishReasonList,
  isRecord,
  modelInHead,
  noteFinishReason,
  num,
  sub,
} from './normalize.js';
export { HeadTail } from './body-buffers.js';
export { JsonLines } from './jsonl.js';

/** The usage layer: what a request asks, what a response used, what it cost. */
export type { RequestInfo, ResponseTap, Usage } from './types.js';
export { parseRequestInfo } from './request-info.js';
export { createResponseTap } from './response-tap.js';
export { injectStreamUsage, createUsageStripper } from './stream-usage.js';
export { computeCost, PRICE_SOURCE } from './cost.js';
export { classifyEndpoint, type Endpoint } from './normalize.js';

/**
 * Per-key limits (docs/limits.md): what the proxy, the key actions and the server use of them.
 *
 * - `limiter.ts` decides: `check`, `admit`, `settle`, `record`, on this instance's counts (`local/`) and,
 *   with Redis, what every instance shares (`shared/`).
 * - `local/`: what one instance counts and decides alone: requests and tokens per minute (`rate.ts`), spend
 *   per budget period (`spend.ts`), in-flight slots and hard-budget reservations (`holds.ts`).
 * - `shared/`: what Redis shares between instances: counters added up by a periodic sync
 *   (`redis-counters.ts`), holds taken by one script across instances (`redis-holds.ts`, `holds.ts`), and
 *   hard-budget leases (`leases.ts`).
 * - `end-users.ts`: a key's caps per end user as a key of their own, counted by everything above;
 *   `members.ts`: a member's limits across their keys, the same way; `levels.ts` admits a request held to
 *   several of them (end user, key, member) and makes holds.
 * - Beside them: what the console and CLI show of a key's budget and rates (`budget-status.ts`,
 *   `rate-status.ts`), the request's cost bound (`bound.ts`), allow-lists (`access.ts`), the refusals
 *   (`refusals.ts`), UTC periods (`periods.ts`), settings validation (`settings.ts`), and the WebSocket's
 *   ordered wait for an admission (`ordered-gate.ts`).
 *
 * One convention: on the request's path a decision is returned, never thrown: null (nothing held), a Hold,
 * or a refusal (a ProxyError, src/errors.ts); a promise of one only when it must wait (Redis, or a hard
 * budget's spend not loaded yet). Validating settings, off the request's path, throws `invalid_limits`.
 */
export { socketCreateInfo } from './bound.js';
export { memberSpendSince, readMemberBudgetStatus, type MemberSpendSince } from './members.js';
export { readBudgetStatus } from './budget-status.js';
export { NO_LOCAL_COUNTS, readRateStatus } from './rate-status.js';
export { DEFAULT_SYNC_MS, KeyLimiter, type LimiterOptions } from './limiter.js';
export { toNanos } from './local/spend.js';
export { OrderedGate } from './ordered-gate.js';
export { waitInWords } from './periods.js';
export { MEMBER_LIMIT_FIELDS, mergeKeyLimits, mergeMemberLimits, NO_LIMITS, pickLimits } from './settings.js';
export { createRedisCounters, type SharedCounters } from './shared/redis-counters.js';
export { createRedisHolds, type SharedHolds } from './shared/redis-holds.js';
export type { Admission, Hold, Limits } from './types.js';

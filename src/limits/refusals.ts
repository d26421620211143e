/** The refusals of per-key limits: each names the limit and when to retry (docs/limits.md). */
import { ProxyError } from '../errors.js';
import type { Provider } from '../types.js';
import type { KeyRecord } from '../store/types.js';
import { isEndUserKey } from './end-users.js';
import { isMemberKey } from './members.js';
import { secondsUntil, waitInWords } from './periods.js';

/** Retry-after for a refusal that ends when requests in flight end, not with a window or a period. */
const IN_FLIGHT_RETRY_S = 1;
const MAX_SHOWN_MODEL = 100;

/**
 * Whose limit it is beside the key's own: " per end user" for an end user's caps (end-users.ts), " across
 * this member's keys" for a member's limits (members.ts), else nothing.
 */
export const perEndUser = (key: KeyRecord): string =>
  isEndUserKey(key) ? ' per end user' : isMemberKey(key) ? " across this member's keys" : '';

export function budgetRefusal(key: KeyRecord, period: string, wait: number): ProxyError {
  return new ProxyError(
    'proxy_budget_exceeded',
    `Budget: $${key.budget_usd}${perEndUser(key)} per ${period} (UTC); it resets in ${waitInWords(wait)}.`,
    wait,
  );
}

/**
 * Until the period ends when the spend alone leaves no room for this request; else the room is held by
 * requests in flight, which free it (or spend it) as they end.
 */
export function budgetWait(spent: number, amount: number, budget: number, end: number, now: number): number {
  return spent + amount > budget ? secondsUntil(end, now) : IN_FLIGHT_RETRY_S;
}

/** Requests or tokens per minute (`what`: "60 requests"). */
export function rateRefusal(what: string, wait: number): ProxyError {
  return new ProxyError('proxy_rate_limited', `Limit: ${what} per minute.`, wait);
}

export function concurrencyRefusal(key: KeyRecord): ProxyError {
  return new ProxyError(
    'proxy_rate_limited',
    `Limit: ${key.max_concurrent} requests in flight at once.`,
    IN_FLIGHT_RETRY_S,
  );
}

export function unpricedRefusal(model: string | null, path: string, key?: KeyRecord): ProxyError {
  const what = model === null ? path.slice(0, 100) : `model ${model.slice(0, MAX_SHOWN_MODEL)}`;
  const who =
    key && isMemberKey(key)
      ? "This key's member has a hard budget across their keys"
      : 'This key has a hard budget';
  return new ProxyError(
    'proxy_key_forbidden',
    `${who} and keyrelay knows no price for ${what}, so it cannot reserve its cost.`,
  );
}

export function forbidden(key: KeyRecord, provider: Provider, model: string | null): ProxyError {
  if (key.allowed_providers && !key.allowed_providers.includes(provider)) {
    return new ProxyError('proxy_key_forbidden', `Provider ${provider} is not allowed for this key.`);
  }
  const shown = model === null ? 'a request without a model' : `model ${model.slice(0, MAX_SHOWN_MODEL)}`;
  return new ProxyError('proxy_key_forbidden', `This key does not allow ${shown}.`);
}

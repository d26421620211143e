/**
 * Caps per end user (docs/limits.md): a key's `user_*` limits apply to each `proxy-user` value on their own.
 * Each end user of a key is counted as a key of its own, whose id joins the key's id and the end user's
 * (base64url, so any value fits a Redis key name and the id splits back apart): its rpm, its budget's spend,
 * reservations, leases and shared counters are the key limits' own machinery, with nothing apart.
 */
import type { KeyRecord } from '../store/types.js';

/** Never in a key id (ULIDs are Crockford base32) nor in base64url. */
const SEPARATOR = '~';

export function endUserKeyId(keyId: string, endUser: string): string {
  return `${keyId}${SEPARATOR}${Buffer.from(endUser, 'utf8').toString('base64url')}`;
}

/** The key and end user an id names, or null for a key's own id. */
export function splitEndUserKeyId(id: string): { keyId: string; endUser: string } | null {
  const at = id.indexOf(SEPARATOR);
  if (at === -1) return null;
  return { keyId: id.slice(0, at), endUser: Buffer.from(id.slice(at + 1), 'base64url').toString('utf8') };
}

export const isEndUserKey = (key: Pick<KeyRecord, 'id'>): boolean => key.id.includes(SEPARATOR);

/** The limits one end user of `key` is held to, as a key record; null when the key caps no end user. */
export function endUserKey(key: KeyRecord, endUser: string): KeyRecord | null {
  if (key.user_rate_limit_rpm == null && key.user_budget_usd == null) return null;
  return {
    ...key,
    id: endUserKeyId(key.id, endUser),
    allowed_providers: null,
    allowed_models: null,
    rate_limit_rpm: key.user_rate_limit_rpm,
    budget_usd: key.user_budget_usd,
    budget_period: key.user_budget_period,
    budget_mode: key.user_budget_mode,
    rate_limit_tpm: null,
    max_concurrent: null,
    user_rate_limit_rpm: null,
    user_budget_usd: null,
    user_budget_period: null,
  };
}

/**
 * Limits per member (docs/limits.md, "Per member"): a member's rpm and budget bound the sum of all their keys
 * in an organization, beside each key's own limits. As an end user's caps (end-users.ts), the member is
 * counted as a key of its own, whose id joins the organization's id and the account's: its rpm, its
 * budget's spend, reservations, leases and shared counters are the key limits' own machinery. Its spend in
 * a period is the spend of every key the member holds there (service keys are no member's).
 */
import type { ConfigStore, KeyBudgetStatus, KeyRecord, LogStore, MemberLimits } from '../store/types.js';
import { periodBounds } from './periods.js';

/** Never in an organization or account id (ULIDs), nor in an end user's id (end-users.ts). */
const SEPARATOR = '@';

export const memberKeyId = (orgId: string, accountId: string): string => `${orgId}${SEPARATOR}${accountId}`;

/** The organization and account a member's id names, or null for any other id. */
export function splitMemberKeyId(id: string): { orgId: string; accountId: string } | null {
  const at = id.indexOf(SEPARATOR);
  return at === -1 ? null : { orgId: id.slice(0, at), accountId: id.slice(at + 1) };
}

export const isMemberKey = (key: Pick<KeyRecord, 'id'>): boolean => key.id.includes(SEPARATOR);

/** The limits the key's member is held to across their keys, as a key record; null when there are none. */
export function memberKey(key: KeyRecord): KeyRecord | null {
  const m = key.member_limits;
  if (m == null || key.service || (m.rate_limit_rpm == null && m.budget_usd == null)) return null;
  return {
    ...key,
    id: memberKeyId(key.org_id, key.account_id),
    allowed_providers: null,
    allowed_models: null,
    rate_limit_rpm: m.rate_limit_rpm,
    // What a member's rpm counts is what a key's counts by default: billable calls.
    rate_limit_scope: 'billable',
    budget_usd: m.budget_usd,
    budget_period: m.budget_period,
    budget_mode: m.budget_mode,
    rate_limit_tpm: null,
    max_concurrent: null,
    user_rate_limit_rpm: null,
    user_budget_usd: null,
    user_budget_period: null,
    member_limits: null,
  };
}

export type MemberSpendSince = (orgId: string, accountId: string, since: string) => Promise<number>;

/** A member's spend since `since`: the spend of every key they hold in the organization, revoked ones too. */
export function memberSpendSince(
  config: Pick<ConfigStore, 'listOrgKeys'>,
  log: Pick<LogStore, 'spendSince'>,
): MemberSpendSince {
  return async (orgId, accountId, since) => {
    const keys = await config.listOrgKeys(orgId, accountId);
    const spent = await Promise.all(keys.map((k) => log.spendSince(k.id, since)));
    return spent.reduce((a, b) => a + b, 0);
  };
}

/** The status of a member's budget now (as readBudgetStatus for a key's), or null without one. */
export async function readMemberBudgetStatus(
  spendSince: MemberSpendSince,
  orgId: string,
  accountId: string,
  limits: MemberLimits,
  now: Date,
): Promise<KeyBudgetStatus | null> {
  if (limits.budget_usd === null) return null;
  const { start, end } = periodBounds(limits.budget_period ?? 'month', now.getTime());
  const spent = await spendSince(orgId, accountId, new Date(start).toISOString());
  return {
    spent_usd: spent,
    budget_usd: limits.budget_usd,
    period_start: new Date(start).toISOString(),
    resets_at: new Date(end).toISOString(),
  };
}

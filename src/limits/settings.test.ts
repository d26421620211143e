import { describe, expect, it } from 'vitest';
import { mergeKeyLimits, NO_LIMITS } from './settings.js';

const bad = (patch: Parameters<typeof mergeKeyLimits>[1], current = NO_LIMITS) => {
  try {
    mergeKeyLimits(current, patch);
  } catch (err) {
    return (err as { code: string }).code;
  }
  return 'accepted';
};

describe('mergeKeyLimits', () => {
  it('keeps fields left out, clears fields set to null, and normalises lists', () => {
    const set = mergeKeyLimits(null, {
      allowed_providers: ['anthropic', 'openai', 'openai'],
      allowed_models: ['a', 'b*', 'a'],
      rate_limit_rpm: 10,
    });
    expect(set).toEqual({
      allowed_providers: ['openai', 'anthropic'],
      allowed_models: ['a', 'b*'],
      rate_limit_rpm: 10,
      budget_usd: null,
      budget_period: null,
      budget_mode: 'soft',
      rate_limit_tpm: null,
      max_concurrent: null,
      rate_limit_scope: 'billable',
      budget_unpriced: 'refuse',
      user_rate_limit_rpm: null,
      user_budget_usd: null,
      user_budget_period: null,
      user_budget_mode: 'soft',
    });
    expect(mergeKeyLimits(set, { rate_limit_rpm: null })).toEqual({ ...set, rate_limit_rpm: null });
    const more = mergeKeyLimits(set, {
      budget_mode: 'hard',
      budget_unpriced: 'allow',
      rate_limit_tpm: 1000,
      max_concurrent: 3,
    });
    expect(more).toMatchObject({
      budget_mode: 'hard',
      budget_unpriced: 'allow',
      rate_limit_tpm: 1000,
      max_concurrent: 3,
      rate_limit_rpm: 10,
    });
    // The mode outlives its budget being cleared, so a budget set again keeps it.
    expect(mergeKeyLimits(more, { rate_limit_scope: 'all', max_concurrent: null })).toMatchObject({
      budget_mode: 'hard',
      rate_limit_scope: 'all',
      max_concurrent: null,
    });
  });

  it('gives a budget the current period, else month; clearing the budget clears the period', () => {
    const monthly = mergeKeyLimits(null, { budget_usd: 5 });
    expect(monthly.budget_period).toBe('month');
    const daily = mergeKeyLimits(monthly, { budget_period: 'day' });
    expect(daily).toMatchObject({ budget_usd: 5, budget_period: 'day' });
    expect(mergeKeyLimits(daily, { budget_usd: 7 }).budget_period).toBe('day');
    expect(mergeKeyLimits(daily, { budget_usd: null }).budget_period).toBeNull();
  });

  it('refuses out-of-range values with invalid_limits', () => {
    expect(bad({ rate_limit_rpm: 0 })).toBe('invalid_limits');
    expect(bad({ budget_unpriced: 'maybe' as 'allow' })).toBe('invalid_limits');
    expect(bad({ rate_limit_rpm: 1.5 })).toBe('invalid_limits');
    expect(bad({ rate_limit_rpm: 1_000_001 })).toBe('invalid_limits');
    expect(bad({ rate_limit_rpm: 1_000_000 })).toBe('accepted');
    expect(bad({ budget_usd: 0.009 })).toBe('invalid_limits');
    expect(bad({ budget_usd: 1_000_000.01 })).toBe('invalid_limits');
    expect(bad({ budget_usd: Number.NaN })).toBe('invalid_limits');
    expect(bad({ budget_usd: 0.01 })).toBe('accepted');
    expect(bad({ budget_period: 'day' })).toBe('invalid_limits');
    expect(bad({ allowed_providers: [] })).toBe('invalid_limits');
    expect(bad({ allowed_models: [] })).toBe('invalid_limits');
    expect(bad({ allowed_models: Array.from({ length: 51 }, (_, i) => `m${i}`) })).toBe('invalid_limits');
    expect(bad({ allowed_models: Array.from({ length: 50 }, (_, i) => `m${i}`) })).toBe('accepted');
    expect(bad({ allowed_models: ['gpt*4'] })).toBe('invalid_limits');
    expect(bad({ rate_limit_tpm: 0 })).toBe('invalid_limits');
    expect(bad({ rate_limit_tpm: 1_000_000_001 })).toBe('invalid_limits');
    expect(bad({ rate_limit_tpm: 1_000_000_000 })).toBe('accepted');
    expect(bad({ max_concurrent: 0 })).toBe('invalid_limits');
    expect(bad({ max_concurrent: 2.5 })).toBe('invalid_limits');
    expect(bad({ max_concurrent: 100_000 })).toBe('accepted');
    expect(bad({ budget_mode: 'strict' as 'hard' })).toBe('invalid_limits');
    expect(bad({ rate_limit_scope: 'some' as 'all' })).toBe('invalid_limits');
    expect(bad({ user_rate_limit_rpm: 0 })).toBe('invalid_limits');
    expect(bad({ user_rate_limit_rpm: 2.5 })).toBe('invalid_limits');
    expect(bad({ user_rate_limit_rpm: 1_000_000 })).toBe('accepted');
    expect(bad({ user_budget_usd: 0.009 })).toBe('invalid_limits');
    expect(bad({ user_budget_usd: 0.01 })).toBe('accepted');
    expect(bad({ user_budget_period: 'day' })).toBe('invalid_limits');
    expect(bad({ user_budget_mode: 'strict' as 'hard' })).toBe('invalid_limits');
  });

  it('gives a per-end-user budget its own period and mode, apart from the key budget', () => {
    const capped = mergeKeyLimits(null, { budget_usd: 50, user_budget_usd: 2, user_budget_mode: 'hard' });
    expect(capped).toMatchObject({
      budget_period: 'month',
      budget_mode: 'soft',
      user_budget_usd: 2,
      user_budget_period: 'month',
      user_budget_mode: 'hard',
    });
    const daily = mergeKeyLimits(capped, { user_budget_period: 'day' });
    expect(daily).toMatchObject({ budget_period: 'month', user_budget_period: 'day' });
    expect(mergeKeyLimits(daily, { user_budget_usd: null })).toMatchObject({
      user_budget_usd: null,
      user_budget_period: null,
      user_budget_mode: 'hard',
    });
  });
});

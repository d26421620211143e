import { describe, expect, it } from 'vitest';
import {
  checkModelPattern,
  diffLimits,
  draftFromLimits,
  fieldOfMessage,
  NO_LIMITS,
  parseDraft,
  summarizeLimits,
  type LimitsDraft,
} from './limits.js';

const LIMITED = {
  allowed_providers: ['openai' as const],
  allowed_models: ['gpt-4o*'],
  rate_limit_rpm: 60,
  budget_usd: 25,
  budget_period: 'month' as const,
  budget_mode: 'soft' as const,
  rate_limit_tpm: null,
  max_concurrent: null,
  rate_limit_scope: 'billable' as const,
  budget_unpriced: 'refuse' as const,
  user_rate_limit_rpm: null,
  user_budget_usd: null,
  user_budget_period: null,
  user_budget_mode: 'soft' as const,
};

function parsed(d: Partial<LimitsDraft>) {
  const r = parseDraft({ ...draftFromLimits(NO_LIMITS), ...d });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.limits;
}

describe('summarizeLimits', () => {
  it('reads as one compact line, in the order provider, models, rate, budget', () => {
    expect(summarizeLimits(LIMITED)).toEqual(['OpenAI only', 'gpt-4o*', '60 rpm', '$25/month']);
  });

  it('is empty for a key without limits', () => {
    expect(summarizeLimits(NO_LIMITS)).toEqual([]);
  });

  it('names two models at most and counts the rest', () => {
    const s = summarizeLimits({ ...NO_LIMITS, allowed_models: ['a', 'b*', 'c', 'd'] });
    expect(s).toEqual(['a, b* +2 more']);
  });

  it('names tokens per minute, requests at once and a hard budget', () => {
    const l = {
      ...NO_LIMITS,
      rate_limit_tpm: 90_000,
      max_concurrent: 3,
      budget_usd: 5,
      budget_mode: 'hard' as const,
    };
    expect(summarizeLimits({ ...l, budget_period: 'day' })).toEqual([
      '90,000 tpm',
      '3 at once',
      '$5/day (hard)',
    ]);
  });

  it('shows cents only when the budget has them', () => {
    expect(summarizeLimits({ ...NO_LIMITS, budget_usd: 2.5, budget_period: 'day' })).toEqual(['$2.50/day']);
  });
});

describe('parseDraft', () => {
  it('treats empty fields and no ticked provider as no limit', () => {
    expect(parsed({})).toEqual(NO_LIMITS);
  });

  it('adds a model still typed in the box', () => {
    expect(parsed({ models: ['gpt-4o*'], modelInput: ' claude-3* ' }).allowed_models).toEqual([
      'gpt-4o*',
      'claude-3*',
    ]);
  });

  it('sends providers as ticked, and a reordering is no change (the server keeps its own order)', () => {
    expect(parsed({ providers: ['anthropic', 'azure-east'] }).allowed_providers).toEqual([
      'anthropic',
      'azure-east',
    ]);
    const both = { ...LIMITED, allowed_providers: ['openai', 'anthropic'] };
    expect(diffLimits(both, { ...both, allowed_providers: ['anthropic', 'openai'] })).toEqual({});
  });

  it('refuses out-of-range numbers per field', () => {
    const r = parseDraft({
      ...draftFromLimits(NO_LIMITS),
      rpm: '1.5',
      budget: '0.001',
      tpm: '0',
      concurrent: '2.5',
    });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(Object.keys(r.errors).sort()).toEqual(['budget', 'concurrent', 'rpm', 'tpm']);
  });

  it('reads the new limits and the modes', () => {
    expect(parsed({ tpm: '1000', concurrent: '4', mode: 'hard', scope: 'all' })).toMatchObject({
      rate_limit_tpm: 1000,
      max_concurrent: 4,
      budget_mode: 'hard',
      rate_limit_scope: 'all',
    });
  });
});

describe('checkModelPattern', () => {
  it('allows * only at the end, like the server', () => {
    expect(checkModelPattern('gpt-4o*', [])).toBeNull();
    expect(checkModelPattern('gpt-*-mini', [])).toMatch(/only at the end/);
    expect(checkModelPattern('gpt 4o', [])).toMatch(/no spaces/);
    expect(checkModelPattern('gpt-4o', ['gpt-4o'])).toMatch(/already/);
  });
});

describe('diffLimits', () => {
  it('sends only the fields that changed', () => {
    expect(diffLimits(LIMITED, { ...LIMITED, rate_limit_rpm: 1 })).toEqual({ rate_limit_rpm: 1 });
    expect(diffLimits(LIMITED, { ...LIMITED })).toEqual({});
  });

  it('clears a removed limit with null, and drops the period with the budget', () => {
    expect(
      diffLimits(LIMITED, { ...LIMITED, allowed_models: null, budget_usd: null, budget_period: null }),
    ).toEqual({ allowed_models: null, budget_usd: null });
  });

  it('sends the budget together with a changed period', () => {
    expect(diffLimits(LIMITED, { ...LIMITED, budget_period: 'day' })).toEqual({
      budget_usd: 25,
      budget_period: 'day',
    });
  });

  it('sends a changed mode, scope, tpm or in-flight limit alone', () => {
    expect(diffLimits(LIMITED, { ...LIMITED, budget_mode: 'hard', max_concurrent: 2 })).toEqual({
      budget_mode: 'hard',
      max_concurrent: 2,
    });
    expect(diffLimits(LIMITED, { ...LIMITED, rate_limit_scope: 'all', rate_limit_tpm: 5 })).toEqual({
      rate_limit_scope: 'all',
      rate_limit_tpm: 5,
    });
    expect(diffLimits(LIMITED, { ...LIMITED, budget_unpriced: 'allow' })).toEqual({
      budget_unpriced: 'allow',
    });
  });

  it('from no limits gives exactly the set fields, as key creation takes them', () => {
    expect(diffLimits(NO_LIMITS, { ...NO_LIMITS, rate_limit_rpm: 5 })).toEqual({ rate_limit_rpm: 5 });
  });
});

describe('fieldOfMessage', () => {
  it('maps the server’s invalid_limits messages to the form field they name', () => {
    expect(fieldOfMessage('rate_limit_rpm must be null or an integer 1–1000000.')).toBe('rpm');
    expect(fieldOfMessage('budget_period needs a budget_usd.')).toBe('budget');
    expect(fieldOfMessage('allowed_models: each entry …')).toBe('models');
    expect(fieldOfMessage('Something else')).toBe('general');
  });
});

describe('caps per end user', () => {
  it('reads, summarizes and diffs the rpm and budget per end user, the period travelling with the budget', () => {
    const capped = parsed({ userRpm: '10', userBudget: '2.5', userPeriod: 'day', userMode: 'hard' });
    expect(capped).toMatchObject({
      user_rate_limit_rpm: 10,
      user_budget_usd: 2.5,
      user_budget_period: 'day',
      user_budget_mode: 'hard',
    });
    expect(summarizeLimits(capped)).toEqual(['10 rpm per end user', '$2.50/day per end user (hard)']);
    expect(diffLimits(NO_LIMITS, capped)).toEqual({
      user_rate_limit_rpm: 10,
      user_budget_usd: 2.5,
      user_budget_period: 'day',
      user_budget_mode: 'hard',
    });
    expect(diffLimits(capped, { ...capped, user_budget_usd: null, user_budget_period: null })).toEqual({
      user_budget_usd: null,
    });
    expect(draftFromLimits(capped)).toMatchObject({ userRpm: '10', userBudget: '2.5', userPeriod: 'day' });
  });

  it('refuses out-of-range caps on their own fields, and maps the server’s messages to them', () => {
    const r = parseDraft({ ...draftFromLimits(NO_LIMITS), userRpm: '0', userBudget: '0.001' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(Object.keys(r.errors).sort()).toEqual(['userBudget', 'userRpm']);
    expect(fieldOfMessage('user_rate_limit_rpm must be null or an integer 1–1000000.')).toBe('userRpm');
    expect(fieldOfMessage('user_budget_period needs a user_budget_usd.')).toBe('userBudget');
  });
});

import { describe, expect, it } from 'vitest';
import { isModelAllowed, isRequestAllowed, isValidModelPattern } from './access.js';

const any = { allowed_providers: null, allowed_models: null };

describe('isRequestAllowed', () => {
  it('allows everything when neither list is set', () => {
    expect(isRequestAllowed(any, 'openai', null, 'POST')).toBe(true);
    expect(isRequestAllowed(any, 'anthropic', 'claude-x', 'POST')).toBe(true);
  });

  it('refuses a provider outside allowed_providers', () => {
    const l = { ...any, allowed_providers: ['anthropic' as const] };
    expect(isRequestAllowed(l, 'openai', 'gpt-4o', 'POST')).toBe(false);
    expect(isRequestAllowed(l, 'anthropic', 'claude-x', 'POST')).toBe(true);
  });

  it('lets a request without a model through a model allow-list only when it reads (GET/HEAD)', () => {
    const l = { ...any, allowed_models: ['gpt-4o'] };
    expect(isRequestAllowed(l, 'openai', null, 'GET')).toBe(true);
    expect(isRequestAllowed(l, 'openai', null, 'HEAD')).toBe(true);
    expect(isRequestAllowed(l, 'openai', null, 'POST')).toBe(false);
    expect(isRequestAllowed(l, 'openai', null, undefined)).toBe(false);
  });
});

describe('isModelAllowed', () => {
  it('matches exact names exactly and prefix* patterns by prefix', () => {
    const list = ['gpt-4o', 'claude-sonnet-*'];
    expect(isModelAllowed(list, 'gpt-4o')).toBe(true);
    expect(isModelAllowed(list, 'gpt-4o-mini')).toBe(false);
    expect(isModelAllowed(list, 'GPT-4o')).toBe(false);
    expect(isModelAllowed(list, 'claude-sonnet-4-6')).toBe(true);
    expect(isModelAllowed(list, 'claude-sonnet-')).toBe(true);
    expect(isModelAllowed(list, 'claude-opus-4')).toBe(false);
    expect(isModelAllowed(['*'], 'anything')).toBe(true);
  });

  it('compiles a new list afresh (a changed key brings a new array)', () => {
    const first = ['a*'];
    expect(isModelAllowed(first, 'abc')).toBe(true);
    const second = ['b*'];
    expect(isModelAllowed(second, 'abc')).toBe(false);
  });
});

describe('isValidModelPattern', () => {
  it('accepts names and one trailing star, refuses inner stars, blanks, control characters and long ones', () => {
    for (const ok of ['gpt-4o', 'gpt-4o*', '*', 'models/gemini:1.5'])
      expect(isValidModelPattern(ok)).toBe(true);
    for (const bad of ['', 'gpt*4o', '**', 'a b', 'x\n', 'x'.repeat(201)])
      expect(isValidModelPattern(bad)).toBe(false);
  });
});

import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requestBound } from './bound.js';
import { KeyLimiter, type Hold } from './limiter.js';
import { createRedisCounters } from './shared/redis-counters.js';
import { keyRecord } from '../../test/helpers/key-record.js';

const key = keyRecord;

const noSpend = () => Promise.resolve(0);
const opened: KeyLimiter[] = [];
const client = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
afterAll(async () => {
  for (const l of opened) await l.close();
  await client.quit();
});
function limiter(opts: Partial<ConstructorParameters<typeof KeyLimiter>[0]> = {}) {
  // A sync interval far beyond the test: rounds run only when the test calls sync().
  const l = new KeyLimiter({ spendSince: noSpend, syncMs: 3_600_000, ...opts });
  opened.push(l);
  return l;
}

describe('KeyLimiter', () => {
  it('lets a key without limits through without tracking it', () => {
    const l = limiter();
    for (let i = 0; i < 100; i++) expect(l.check(key(), 'openai', 'gpt-4o', 'POST')).toBeNull();
    expect(l.trackedKeys).toBe(0);
  });

  it('names what was refused: the provider, the model, the rate, the budget', async () => {
    const l = limiter({ spendSince: () => Promise.resolve(3) });
    expect(l.check(key({ allowed_providers: ['openai'] }), 'anthropic', 'c', 'POST')?.message).toContain(
      'Provider anthropic',
    );
    const m = l.check(key({ allowed_models: ['x'] }), 'openai', 'gpt-4o', 'POST');
    expect([m?.code, m?.status]).toEqual(['proxy_key_forbidden', 403]);
    expect(m?.message).toContain('model gpt-4o');
    const limited = key({ rate_limit_rpm: 1 });
    expect(l.check(limited, 'openai', 'gpt-4o', 'POST')).toBeNull();
    const r = l.check(limited, 'openai', 'gpt-4o', 'POST');
    expect([r?.code, r?.status, r?.retryAfterSeconds !== undefined]).toEqual([
      'proxy_rate_limited',
      429,
      true,
    ]);
    const budgeted = key({ budget_usd: 2, budget_period: 'month' });
    expect(l.check(budgeted, 'openai', 'gpt-4o', 'POST')).toBeNull(); // loading: allowed
    await new Promise((res) => setImmediate(res));
    const b = l.check(budgeted, 'openai', 'gpt-4o', 'POST');
    expect([b?.code, b?.status]).toEqual(['proxy_budget_exceeded', 429]);
    expect(b?.retryAfterSeconds).toBeGreaterThan(0);
  });

  it('counts a recorded cost against the key’s budget', async () => {
    const l = limiter();
    const k = key({ budget_usd: 1, budget_period: 'day' });
    l.check(k, 'openai', 'gpt-4o', 'POST');
    await new Promise((res) => setImmediate(res));
    const row = { key_id: k.id, created_at: new Date().toISOString(), cost_usd: 1 };
    l.record(row as Parameters<KeyLimiter['record']>[0]);
    expect(l.check(k, 'openai', 'gpt-4o', 'POST')?.code).toBe('proxy_budget_exceeded');
  });

  it('shares a rate limit between two instances after one sync round', async () => {
    const a = limiter({ shared: createRedisCounters(client) });
    const b = limiter({ shared: createRedisCounters(client) });
    const k = key({ rate_limit_rpm: 5 });
    for (let i = 0; i < 3; i++) expect(a.check(k, 'openai', 'm', 'POST')).toBeNull();
    expect(b.check(k, 'openai', 'm', 'POST')).toBeNull();
    await a.sync();
    await b.sync();
    expect(b.check(k, 'openai', 'm', 'POST')).toBeNull(); // 3 + 1 + this one = 5
    expect(b.check(k, 'openai', 'm', 'POST')?.code).toBe('proxy_rate_limited');
    await b.sync();
    await a.sync();
    expect(a.check(k, 'openai', 'm', 'POST')?.code).toBe('proxy_rate_limited');
  });

  it('counts a long prompt in bytes far from a limit and in tokens near it, so a near-full budget still fits', async () => {
    const l = limiter();
    const text = 'The relay forwards every request unchanged. '.repeat(200); // ~8,800 bytes, ~1,600 tokens
    const json = { model: 'gpt-4o', messages: [{ role: 'user', content: text }], max_tokens: 10 };
    const info = {
      provider: 'openai' as const,
      path: '/v1/chat/completions',
      model: 'gpt-4o',
      stream: false,
      end_user: null,
      json,
    };
    const exact = requestBound('openai', info.path, 'gpt-4o', json, 4096, 'tokens');
    const bytes = requestBound('openai', info.path, 'gpt-4o', json, 4096, 'bytes');
    expect(bytes.tokens).toBeGreaterThan(4 * exact.tokens);
    // Far from the budget: the byte count is reserved (once the period's spend is loaded; until then the
    // room is unknown and the tokenizer counts).
    const roomy = key({ budget_usd: 100, budget_period: 'day', budget_mode: 'hard' });
    l.settle((await l.admit(roomy, 'openai', info, 'POST')) as Hold, null);
    const far = (await l.admit(roomy, 'openai', info, 'POST')) as Hold;
    expect(far.nanos).toBe(bytes.nanos);
    // A budget that holds the exact bound but not the byte count: admitted on the tokenizer's count.
    const tight = key({ budget_usd: (exact.nanos! * 1.5) / 1e9, budget_period: 'day', budget_mode: 'hard' });
    const near = (await l.admit(tight, 'openai', info, 'POST')) as Hold;
    expect(near).not.toBeInstanceOf(Error);
    expect(near.nanos).toBe(exact.nanos);
    // Tokens per minute likewise.
    const tpm = key({ rate_limit_tpm: Math.ceil(exact.tokens * 1.5) });
    const t = (await l.admit(tpm, 'openai', info, 'POST')) as Hold;
    expect(t.tokens).toBe(exact.tokens);
  });

  describe('caps per end user', () => {
    const chat = {
      provider: 'openai' as const,
      path: '/v1/chat/completions',
      model: 'gpt-4o',
      stream: false,
      end_user: null,
      json: { model: 'gpt-4o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
    };
    const admit = (l: KeyLimiter, k: ReturnType<typeof key>, user: string | null, model = 'gpt-4o') =>
      l.admit(k, 'openai', { ...chat, model }, 'POST', user);

    it('refuses what the key forbids as forbidden, before the end user’s counts', async () => {
      const l = limiter();
      const k = key({ allowed_models: ['gpt-4o'], user_rate_limit_rpm: 1 });
      expect(await admit(l, k, 'ann')).not.toBeInstanceOf(Error);
      const r = await admit(l, k, 'ann', 'o3');
      expect([(r as Error & { code: string }).code]).toEqual(['proxy_key_forbidden']);
    });

    it('does not count a request the key refuses against its end user’s rate', async () => {
      const l = limiter();
      const k = key({ rate_limit_rpm: 1, user_rate_limit_rpm: 2 });
      l.settle((await admit(l, k, 'ann')) as Hold, null);
      // The key's own rpm refuses the next two: ann's count stays at one.
      expect(await admit(l, k, 'ann')).toMatchObject({ code: 'proxy_rate_limited' });
      expect(await admit(l, k, 'ann')).toMatchObject({ code: 'proxy_rate_limited' });
      const roomier = { ...k, rate_limit_rpm: 10 };
      expect(await admit(l, roomier, 'ann')).not.toBeInstanceOf(Error);
      const third = await admit(l, roomier, 'ann');
      expect(third).toMatchObject({ code: 'proxy_rate_limited' });
      expect((third as Error).message).toContain('2 requests per end user per minute');
    });

    it('counts a settled cost against the end user’s budget, not another end user’s', async () => {
      const l = limiter();
      const k = key({ user_budget_usd: 1, user_budget_period: 'day' });
      const first = await admit(l, k, 'ann');
      expect(first).not.toBeInstanceOf(Error);
      await new Promise((res) => setImmediate(res)); // the period's spend loads
      const at = new Date().toISOString();
      const row = { key_id: k.id, end_user: 'ann', created_at: at, cost_usd: 1 };
      l.settle(first as Hold, row as Parameters<KeyLimiter['settle']>[1]);
      expect(await admit(l, k, 'ann')).toMatchObject({ code: 'proxy_budget_exceeded' });
      expect(await admit(l, k, 'bob')).not.toBeInstanceOf(Error);
      // Requests naming no end user are held to the key's limits alone (it has none).
      expect(await admit(l, k, null)).toBeNull();
    });
  });
});

/**
 * Per-key controls through the real proxy (docs/limits.md): allowed providers and models (403
 * `proxy_key_forbidden`), requests per minute (429 `proxy_rate_limited`) and a spend budget (429
 * `proxy_budget_exceeded`), each with `retry-after` where it applies, in the route's provider shape; a
 * changed limit applies to the next request; with Redis the rate limit is shared by two instances.
 */
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setKeyLimits } from '../src/keys/actions.js';
import { DEFAULT_SYNC_MS } from '../src/limits/limiter.js';
import type { KeyLimits } from '../src/store/types.js';
import { computeCost } from '../src/metering/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { fillLog } from './helpers/log-rows.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';

const REDIS_URL = 'redis://127.0.0.1:6379';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  id: string;
}

async function call(
  h: Harness,
  key: string,
  provider: 'openai' | 'anthropic',
  model: string | null,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const path = provider === 'openai' ? '/v1/chat/completions' : '/v1/messages';
  const body: Record<string, unknown> = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 };
  if (model !== null) body.model = model;
  const res = await request(`${h.url}/api/proxy/${provider}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'proxy-api-key': key,
      ...(provider === 'openai'
        ? { authorization: 'Bearer sk-test-limits' }
        : { 'x-api-key': 'sk-ant-test-limits', 'anthropic-version': '2023-06-01' }),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    body: text,
    id: String(res.headers['x-keyrelay-request-id']),
  };
}

function limit(h: Harness, keyId: string, patch: Partial<KeyLimits>) {
  return setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, keyId, patch);
}

function expectRefusal(r: Reply, status: number, code: string, provider: 'openai' | 'anthropic') {
  expect(r.status).toBe(status);
  expect(r.headers['x-keyrelay-error']).toBe(code);
  const body = JSON.parse(r.body) as Record<string, { type: string; code?: string; message: string }>;
  if (provider === 'openai') {
    expect(body.error).toMatchObject({ type: 'keyrelay_error', code });
  } else {
    const type = status === 403 ? 'permission_error' : 'rate_limit_error';
    expect(body).toMatchObject({ type: 'error', error: { type } });
    expect(body.error!.message).toContain(`(${code})`);
  }
}

describe('per-key limits on one instance', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  it('refuses a provider the key may not use with 403 proxy_key_forbidden, logged, never sent upstream', async () => {
    const u = await h.newUser();
    await limit(h, u.keyId, { allowed_providers: ['openai'] });
    const before = h.anthropic.requests.length;
    const refused = await call(h, u.key, 'anthropic', 'claude-sonnet-4-6');
    expectRefusal(refused, 403, 'proxy_key_forbidden', 'anthropic');
    expect(refused.body).toContain('anthropic');
    expect(h.anthropic.requests.length).toBe(before);
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);

    await h.flushLog();
    const row = await h.kr.services.logStore.getRequest(u.accountId, refused.id);
    expect(row).toMatchObject({
      key_id: u.keyId,
      provider: 'anthropic',
      model: 'claude-sonnet-4-6',
      status: 403,
      outcome: 'refused',
      error_code: 'proxy_key_forbidden',
    });
  });

  it('refuses models outside the allow-list (exact names and prefix* patterns) in the OpenAI shape', async () => {
    const u = await h.newUser();
    await limit(h, u.keyId, { allowed_models: ['gpt-4o-mini', 'claude-sonnet-*'] });
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    expect((await call(h, u.key, 'anthropic', 'claude-sonnet-4-6')).status).toBe(200);
    expectRefusal(await call(h, u.key, 'openai', 'gpt-4o'), 403, 'proxy_key_forbidden', 'openai');
    expectRefusal(
      await call(h, u.key, 'anthropic', 'claude-opus-4-1'),
      403,
      'proxy_key_forbidden',
      'anthropic',
    );
    // A POST that names no model could reach any model, so the allow-list refuses it; a GET reads.
    expectRefusal(await call(h, u.key, 'openai', null), 403, 'proxy_key_forbidden', 'openai');
    const models = await request(`${h.url}/api/proxy/openai/v1/models`, {
      headers: { 'proxy-api-key': u.key, authorization: 'Bearer sk-test-limits' },
    });
    await models.body.text();
    expect(models.statusCode).toBe(200);
  });

  it('raises the SDKs’ own permission errors for a forbidden model', async () => {
    const u = await h.newUser();
    await limit(h, u.keyId, { allowed_models: ['gpt-4o-mini'] });
    const openai = new OpenAI({
      apiKey: 'sk-test-limits',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': u.key },
    });
    const err: unknown = await openai.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(err).toMatchObject({ status: 403, code: 'proxy_key_forbidden' });

    const anthropic = new Anthropic({
      apiKey: 'sk-ant-test-limits',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': u.key },
    });
    const aErr: unknown = await anthropic.messages
      .create({ model: 'claude-sonnet-5-5', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(aErr).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect((aErr as Error).message).toContain('proxy_key_forbidden');
  });

  it('admits rate_limit_rpm requests in a minute and refuses the next with 429 and retry-after', async () => {
    const u = await h.newUser();
    await limit(h, u.keyId, { rate_limit_rpm: 3 });
    for (let i = 0; i < 3; i++) expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    const refused = await call(h, u.key, 'openai', 'gpt-4o-mini');
    expectRefusal(refused, 429, 'proxy_rate_limited', 'openai');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(120);
    expectRefusal(
      await call(h, u.key, 'anthropic', 'claude-sonnet-4-6'),
      429,
      'proxy_rate_limited',
      'anthropic',
    );

    await h.flushLog();
    const row = await h.kr.services.logStore.getRequest(u.accountId, refused.id);
    expect(row).toMatchObject({ status: 429, outcome: 'refused', error_code: 'proxy_rate_limited' });
  });

  it('refuses with 429 proxy_budget_exceeded once the period’s spend reaches the budget', async () => {
    const u = await h.newUser();
    // One million prompt tokens of gpt-4o: a cost the price library knows, far above rounding.
    const usage = { prompt_tokens: 1_000_000, completion_tokens: 0, cached_tokens: 0, reasoning_tokens: 0 };
    const cost = computeCost('openai', 'gpt-4o', {
      input_tokens: 1_000_000,
      output_tokens: 0,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
      source: 'provider',
      model: 'gpt-4o',
    }).cost_usd!;
    expect(cost).toBeGreaterThan(0.5);
    await limit(h, u.keyId, { budget_usd: Math.round(cost * 150) / 100, budget_period: 'day' });
    const costly = { 'x-fake-usage': JSON.stringify(usage) };

    const first = await call(h, u.key, 'openai', 'gpt-4o', costly);
    expect(first.status).toBe(200);
    await h.flushLog();
    expect((await h.kr.services.logStore.getRequest(u.accountId, first.id))!.cost_usd).toBeCloseTo(cost, 9);
    expect((await call(h, u.key, 'openai', 'gpt-4o', costly)).status).toBe(200); // under budget when sent
    const refused = await call(h, u.key, 'openai', 'gpt-4o-mini');
    expectRefusal(refused, 429, 'proxy_budget_exceeded', 'openai');
    const now = new Date();
    const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
    const retryAfter = Number(refused.headers['retry-after']);
    expect(Math.abs(retryAfter - (midnight - now.getTime()) / 1000)).toBeLessThan(5);
    // The SDK user reads when it resets in hours and minutes, not in tens of thousands of seconds.
    const sdkErr: unknown = await new OpenAI({
      apiKey: 'sk-test-limits',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': u.key },
    }).chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(sdkErr).toBeInstanceOf(OpenAI.RateLimitError);
    const message = (sdkErr as InstanceType<typeof OpenAI.RateLimitError>).message;
    expect(message).toMatch(/per day \(UTC\); it resets in (\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)\.$/);
    expect(message).not.toMatch(/\d{4,} s/);

    // A bigger budget lets the key through again at once.
    await limit(h, u.keyId, { budget_usd: cost * 10 });
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
  });

  it('counts spend already in the request log when an instance first sees the key', async () => {
    const u = await h.newUser();
    const usage = { prompt_tokens: 1_000_000, completion_tokens: 0, cached_tokens: 0, reasoning_tokens: 0 };
    const spent = await call(h, u.key, 'openai', 'gpt-4o', { 'x-fake-usage': JSON.stringify(usage) });
    expect(spent.status).toBe(200);
    await h.flushLog();
    const cost = (await h.kr.services.logStore.getRequest(u.accountId, spent.id))!.cost_usd!;
    // The key had no budget when it spent, so only the log knows; the first request after starts the load.
    await limit(h, u.keyId, { budget_usd: cost / 2, budget_period: 'month' });
    await waitUntil(async () => (await call(h, u.key, 'openai', 'gpt-4o-mini')).status === 429);
    const refused = await call(h, u.key, 'openai', 'gpt-4o-mini');
    expectRefusal(refused, 429, 'proxy_budget_exceeded', 'openai');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('counts each cost once while its spend loads, however busy the log’s reader is (SQLite)', async () => {
    // The costs recorded while the load waits are counted here; the load must not also find their rows. On
    // the SQLite reader's worker it queued behind console charts while the writer wrote those rows: each
    // counted twice, and a key under its budget was refused.
    const s = await startHarness();
    try {
      fillLog(join(s.dataDir, 'requests.db'), 300_000, { account_id: 'acct-busy', at: Date.now() - 60_000 });
      const u = await s.newUser();
      const usage = { prompt_tokens: 1_000_000, completion_tokens: 0, cached_tokens: 0, reasoning_tokens: 0 };
      const costly = { 'x-fake-usage': JSON.stringify(usage) };
      const cost = computeCost('openai', 'gpt-4o', {
        input_tokens: 1_000_000,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: 0,
        reasoning_tokens: 0,
        source: 'provider',
        model: 'gpt-4o',
      }).cost_usd!;
      await limit(s, u.keyId, { budget_usd: Math.round(cost * 250) / 100, budget_period: 'month' });
      const charts = Array.from({ length: 5 }, () =>
        s.kr.services.logStore.usageSeries({ account_id: 'acct-busy' }, 'day'),
      );
      // The first call starts the load; both costs are recorded here, and written to the log meanwhile.
      expect((await call(s, u.key, 'openai', 'gpt-4o', costly)).status).toBe(200);
      expect((await call(s, u.key, 'openai', 'gpt-4o', costly)).status).toBe(200);
      await s.flushLog();
      await Promise.all(charts);
      await new Promise((r) => setTimeout(r, 300)); // the load's turn, had it waited behind the charts
      // 2 × cost spent of 2.5: admitted. Then 3 of 2.5: refused.
      expect((await call(s, u.key, 'openai', 'gpt-4o', costly)).status).toBe(200);
      expectRefusal(await call(s, u.key, 'openai', 'gpt-4o'), 429, 'proxy_budget_exceeded', 'openai');
    } finally {
      await s.close();
    }
  });

  it('applies a changed limit to the very next request', async () => {
    const u = await h.newUser();
    await limit(h, u.keyId, { rate_limit_rpm: 1 });
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(429);
    await limit(h, u.keyId, { rate_limit_rpm: 100 });
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    await limit(h, u.keyId, { allowed_providers: ['anthropic'] });
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(403);
    await limit(h, u.keyId, { allowed_providers: null, rate_limit_rpm: null });
    expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
  });

  it('leaves keys without limits untracked', async () => {
    const u = await h.newUser();
    const tracked = h.kr.services.limits.trackedKeys;
    for (let i = 0; i < 5; i++) expect((await call(h, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    expect(h.kr.services.limits.trackedKeys).toBe(tracked);
  });
});

describe('per-key limits shared through Redis', () => {
  let db: TestDatabase;
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    const env = { KEYRELAY_DATABASE_URL: db.url, KEYRELAY_REDIS_URL: REDIS_URL };
    a = await startHarness(env);
    b = await startHarness(env);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  const oneSync = () => new Promise((r) => setTimeout(r, DEFAULT_SYNC_MS * 3));

  it('holds one rate limit across two instances within one sync interval', async () => {
    const u = await a.newUser();
    await limit(a, u.keyId, { rate_limit_rpm: 4 });
    expect((await call(a, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    expect((await call(a, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    await oneSync();
    // B first sees the key now; from its first sync on it counts A's two as well.
    expect((await call(b, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    await oneSync();
    expect((await call(b, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    const refusedOnB = await call(b, u.key, 'openai', 'gpt-4o-mini');
    expectRefusal(refusedOnB, 429, 'proxy_rate_limited', 'openai');
    await oneSync();
    expectRefusal(await call(a, u.key, 'openai', 'gpt-4o-mini'), 429, 'proxy_rate_limited', 'openai');
  });

  it('shares budget spend: a cost recorded on one instance counts on the other', async () => {
    const u = await a.newUser();
    const usage = { prompt_tokens: 1_000_000, completion_tokens: 0, cached_tokens: 0, reasoning_tokens: 0 };
    await limit(a, u.keyId, { budget_usd: 1_000 });
    // Both instances load the (empty) spend first.
    expect((await call(a, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    expect((await call(b, u.key, 'openai', 'gpt-4o-mini')).status).toBe(200);
    await oneSync();
    const spent = await call(a, u.key, 'openai', 'gpt-4o', { 'x-fake-usage': JSON.stringify(usage) });
    expect(spent.status).toBe(200);
    await a.flushLog();
    const cost = (await a.kr.services.logStore.getRequest(u.accountId, spent.id))!.cost_usd!;
    await limit(a, u.keyId, { budget_usd: cost / 2 });
    await oneSync();
    expectRefusal(await call(b, u.key, 'openai', 'gpt-4o-mini'), 429, 'proxy_budget_exceeded', 'openai');
  });
});

async function waitUntil(ok: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Key limits on one instance, through the official SDKs: a hard budget reserves each request's upper bound
 * while it runs (requests in flight cannot overshoot it), refused requests never reach upstream, and every
 * ending (success, upstream error, caller abort, upstream drop) releases what the request held; unpriced
 * calls under a hard budget are refused unless the key allows them; tokens per minute and requests
 * in flight refuse with 429 and retry-after; the rpm leaves listings and token counting out by default.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setKeyLimits } from '../src/keys/actions.js';
import type { KeyLimits } from '../src/store/types.js';
import { computeCost } from '../src/metering/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

const openaiVia = (h: Harness, key: string) =>
  new OpenAI({
    apiKey: 'sk-test-hard',
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });
const anthropicVia = (h: Harness, key: string) =>
  new Anthropic({
    apiKey: 'sk-ant-test-hard',
    baseURL: `${h.url}/api/proxy/anthropic`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });

/** What an output of `tokens` costs on gpt-4o, from the price library (not from keyrelay). */
function outputCost(tokens: number): number {
  const c = computeCost('openai', 'gpt-4o', {
    input_tokens: 0,
    output_tokens: tokens,
    cache_read_tokens: null,
    cache_write_tokens: null,
    reasoning_tokens: null,
    source: 'provider',
    model: null,
  }).cost_usd;
  if (c === null) throw new Error('gpt-4o has no price');
  return c;
}

const SLOW = { 'x-fake-event-delay-ms': '150' }; // five events: a stream in flight for ~0.75 s

type Outcome =
  { ok: true } | { ok: false; status: number; code: string | undefined; retryAfter: string | null };

/** One streamed chat completion read to its end; a refusal as the SDK raises it. */
async function streamChat(
  client: OpenAI,
  body: Partial<OpenAI.ChatCompletionCreateParamsStreaming> = {},
  headers: Record<string, string> = SLOW,
): Promise<Outcome> {
  try {
    const stream = await client.chat.completions.create(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'Say hi' }], stream: true, ...body },
      { headers },
    );
    for await (const chunk of stream) void chunk;
    return { ok: true };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return {
      ok: false,
      status: err.status ?? 0,
      code: err.headers?.get('x-keyrelay-error') ?? undefined,
      retryAfter: err.headers?.get('retry-after') ?? null,
    };
  }
}

const chatsAt = (h: Harness) => h.openai.requests.filter((r) => r.url === '/v1/chat/completions').length;

describe('hard budget, tokens per minute, requests in flight (one instance)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({}, { limits: { defaultOutputTokens: 20_000 } });
  });
  afterAll(() => h.close());

  const limit = (keyId: string, patch: Partial<KeyLimits>) =>
    setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, keyId, patch);

  it('admits only the requests whose reservations fit; the rest get 429 and never reach upstream', async () => {
    const u = await h.newUser();
    // Each request reserves its max_tokens (10,000) at gpt-4o's output price plus its few input tokens.
    await limit(u.keyId, { budget_usd: outputCost(10_000) * 3.5, budget_mode: 'hard', budget_period: 'day' });
    const client = openaiVia(h, u.key);
    const before = chatsAt(h);
    const results = await Promise.all(
      Array.from({ length: 10 }, () => streamChat(client, { max_tokens: 10_000 })),
    );
    const admitted = results.filter((r) => r.ok).length;
    expect(admitted).toBe(3);
    expect(chatsAt(h) - before).toBe(3);
    for (const r of results) {
      if (r.ok) continue;
      expect([r.status, r.code]).toEqual([429, 'proxy_budget_exceeded']);
      // Held by requests in flight, not spent: worth retrying in a second.
      expect(r.retryAfter).toBe('1');
    }
    // Settled to their real (tiny) cost: the budget has room again.
    expect((await streamChat(client, { max_tokens: 10_000 })).ok).toBe(true);
    // A request whose own bound passes the budget waits for the period's end.
    const big = await streamChat(client, { max_tokens: 40_000 });
    expect(big).toMatchObject({ ok: false, status: 429, code: 'proxy_budget_exceeded' });
    expect(Number((big as { retryAfter: string }).retryAfter)).toBeGreaterThan(1);
  });

  it('reserves the configured default output for a request that names no maximum', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { budget_usd: outputCost(20_000) * 1.5, budget_mode: 'hard' });
    const client = openaiVia(h, u.key);
    const results = await Promise.all([streamChat(client), streamChat(client)]);
    expect(results.filter((r) => r.ok)).toHaveLength(1);
  });

  it('releases the reservation at every ending: upstream error, upstream drop, caller abort', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { budget_usd: outputCost(10_000) * 1.5, budget_mode: 'hard' });
    const client = openaiVia(h, u.key);
    const error = await streamChat(client, { max_tokens: 10_000 }, { 'x-fake-status': '500' });
    expect(error).toMatchObject({ ok: false, status: 500 });
    // A cut stream: the SDK may raise or just end early; either way the request is over.
    await streamChat(client, { max_tokens: 10_000 }, { ...SLOW, 'x-fake-drop-after-events': '2' }).catch(
      () => null,
    );
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }], stream: true, max_tokens: 10_000 },
      { headers: { 'x-fake-event-delay-ms': '1000' }, signal: abort.signal },
    );
    // While it runs, its reservation leaves no room for a second one.
    expect(await streamChat(client, { max_tokens: 10_000 })).toMatchObject({ status: 429 });
    abort.abort();
    // The SDK ends or raises on an abort, depending on where it was; the request is over either way.
    try {
      for await (const c of stream) void c;
    } catch {
      // aborted
    }
    for (let i = 0; i < 50 && !(await streamChat(client, { max_tokens: 10_000 }, {})).ok; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect((await streamChat(client, { max_tokens: 10_000 }, {})).ok).toBe(true);
  });

  it('refuses unpriced calls under a hard budget (403, not sent upstream), but not listings', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { budget_usd: 5, budget_mode: 'hard' });
    const client = openaiVia(h, u.key);
    const before = h.openai.requests.length;
    const unknownModel = await streamChat(client, { model: 'no-such-model-13' });
    expect(unknownModel).toMatchObject({ ok: false, status: 403, code: 'proxy_key_forbidden' });
    await expect(client.images.generate({ model: 'gpt-image-1', prompt: 'a relay' })).rejects.toMatchObject({
      status: 403,
    });
    expect(h.openai.requests.length).toBe(before);
    expect((await client.models.list()).data.length).toBeGreaterThan(0);
  });

  it('tokens per minute: refuses with 429 once the window holds the limit, counts real tokens at the end', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { rate_limit_tpm: 25_000 });
    const client = openaiVia(h, u.key);
    const before = chatsAt(h);
    // Each reserves ~10,000 tokens while in flight: two fit, the others wait.
    const results = await Promise.all(
      Array.from({ length: 4 }, () => streamChat(client, { max_tokens: 10_000 })),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(2);
    expect(chatsAt(h) - before).toBe(2);
    const refused = results.find((r) => !r.ok) as Extract<Outcome, { ok: false }>;
    expect([refused.status, refused.code]).toEqual([429, 'proxy_rate_limited']);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    // Settled to the fake's usage (18 tokens each): the window has room again.
    expect((await streamChat(client, { max_tokens: 10_000 }, {})).ok).toBe(true);
  });

  it('requests in flight: the one over the limit gets 429 and retry-after 1; an ended one frees its slot', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { max_concurrent: 2 });
    const client = openaiVia(h, u.key);
    const anthropic = anthropicVia(h, u.key);
    const before = chatsAt(h);
    const results = await Promise.all(Array.from({ length: 5 }, () => streamChat(client)));
    expect(results.filter((r) => r.ok)).toHaveLength(2);
    expect(chatsAt(h) - before).toBe(2);
    expect(results.find((r) => !r.ok)).toMatchObject({
      status: 429,
      code: 'proxy_rate_limited',
      retryAfter: '1',
    });
    expect(h.kr.services.limits.inFlight(u.keyId)).toBe(0);
    const msg = await anthropic.messages.create({
      model: 'claude-sonnet-4-6',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msg.type).toBe('message');
  });

  it('rpm counts billable calls only: model lists and count_tokens pass; with scope `all` they count', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { rate_limit_rpm: 1 });
    const client = openaiVia(h, u.key);
    const anthropic = anthropicVia(h, u.key);
    for (let i = 0; i < 3; i++) {
      await client.models.list();
      await anthropic.messages.countTokens({
        model: 'claude-sonnet-4-6',
        messages: [{ role: 'user', content: 'hi' }],
      });
    }
    expect((await streamChat(client, {}, {})).ok).toBe(true);
    expect(await streamChat(client, {}, {})).toMatchObject({ status: 429, code: 'proxy_rate_limited' });

    const all = await h.newUser();
    await limit(all.keyId, { rate_limit_rpm: 1, rate_limit_scope: 'all' });
    const counted = openaiVia(h, all.key);
    await counted.models.list();
    await expect(counted.models.list()).rejects.toMatchObject({ status: 429 });
  });
});

describe("a hard budget's unpriced calls, per key", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  const limit = (keyId: string, patch: Partial<KeyLimits>) =>
    setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, keyId, patch);

  it('lets them through for a key that allows them, refuses them for the others on the same instance', async () => {
    const allowing = await h.newUser();
    const refusing = await h.newUser();
    await limit(allowing.keyId, { budget_usd: 1, budget_mode: 'hard', budget_unpriced: 'allow' });
    await limit(refusing.keyId, { budget_usd: 1, budget_mode: 'hard' });
    const before = chatsAt(h);
    expect(await streamChat(openaiVia(h, allowing.key), { model: 'no-such-model-13' }, {})).toEqual({
      ok: true,
    });
    expect(await streamChat(openaiVia(h, refusing.key), { model: 'no-such-model-13' }, {})).toMatchObject({
      ok: false,
      status: 403,
      code: 'proxy_key_forbidden',
    });
    expect(chatsAt(h) - before).toBe(1);
    // Changed back, the key refuses them at once (the key cache follows the change).
    await limit(allowing.keyId, { budget_unpriced: 'refuse' });
    expect(await streamChat(openaiVia(h, allowing.key), { model: 'no-such-model-13' }, {})).toMatchObject({
      status: 403,
    });
    expect(chatsAt(h) - before).toBe(1);
  });
});

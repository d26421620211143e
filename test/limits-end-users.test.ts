/**
 * A key's caps per end user (docs/limits.md): requests per minute and a budget for each `proxy-user` value
 * (or its Helicone alias, or the body's own field) under one key, through the official SDKs. On one
 * instance (SQLite) each end user is held apart and requests without an end user are not capped; on two
 * instances (PostgreSQL + Redis) a hard budget per end user holds under 50 concurrent streams from two end
 * users, and refused requests never reach the fake upstream.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setKeyLimits } from '../src/keys/actions.js';
import { computeCost } from '../src/metering/index.js';
import type { KeyLimits } from '../src/store/types.js';
import { startPair, waitFor, type Pair } from './helpers/cluster.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

const MAX_TOKENS = 10_000;
// What the fake reports: fewer prompt tokens than keyrelay's estimate of the body, the whole max_tokens.
const USAGE = { prompt_tokens: 5, completion_tokens: MAX_TOKENS, cached_tokens: 0, reasoning_tokens: 0 };

function price(input: number, output: number): number {
  const c = computeCost('openai', 'gpt-4o', {
    input_tokens: input,
    output_tokens: output,
    cache_read_tokens: null,
    cache_write_tokens: null,
    reasoning_tokens: null,
    source: 'provider',
    model: null,
  }).cost_usd;
  if (c === null) throw new Error('gpt-4o has no price');
  return c;
}

const openai = (base: string, key: string) =>
  new OpenAI({
    apiKey: 'sk-test-end-users',
    baseURL: `${base}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });

interface Outcome {
  status: number | 'ok';
  message?: string;
}

async function chat(
  c: OpenAI,
  headers: Record<string, string>,
  stream = false,
  user?: string,
): Promise<Outcome> {
  const body = {
    model: 'gpt-4o',
    messages: [{ role: 'user' as const, content: 'Write a long story about relays.' }],
    max_tokens: MAX_TOKENS,
    ...(user === undefined ? {} : { user }),
  };
  try {
    if (stream) {
      const s = await c.chat.completions.create({ ...body, stream: true }, { headers });
      for await (const chunk of s) void chunk;
    } else {
      await c.chat.completions.create(body, { headers });
    }
    return { status: 'ok' };
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status ?? 0, message: err.message };
    throw err;
  }
}

describe('caps per end user on one instance', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  const limit = (keyId: string, patch: Partial<KeyLimits>) =>
    setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, keyId, patch);

  it('counts requests per minute for each end user apart (Helicone’s header and the body’s field alike)', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { user_rate_limit_rpm: 2 });
    const c = openai(h.url, u.key);
    const alice = { 'proxy-user': 'alice' };
    expect(await chat(c, alice)).toEqual({ status: 'ok' });
    // Helicone's alias names the same end user.
    expect(await chat(c, { 'helicone-user-id': 'alice' })).toEqual({ status: 'ok' });
    const refused = await chat(c, alice);
    expect(refused.status).toBe(429);
    expect(refused.message).toContain('2 requests per end user per minute');
    // Another end user, and requests naming none, are not held by alice's count.
    expect(await chat(c, { 'proxy-user': 'bob' })).toEqual({ status: 'ok' });
    expect(await chat(c, {}, false, 'bob')).toEqual({ status: 'ok' });
    expect((await chat(c, {}, false, 'bob')).status).toBe(429);
    for (let i = 0; i < 4; i++) expect(await chat(c, {})).toEqual({ status: 'ok' });
    // A refused request never reached upstream, and is logged against the end user.
    await h.flushLog();
    const rows = await h.kr.services.logStore.listRequests(
      { account_id: u.accountId, end_user: 'alice' },
      { limit: 10 },
    );
    expect(rows.items.map((r) => r.status).sort()).toEqual([200, 200, 429]);
  });

  it('refuses an end user who spent a soft budget, not the key’s other end users; clearing the cap lets them in', async () => {
    const u = await h.newUser();
    const each = price(5, MAX_TOKENS);
    await limit(u.keyId, { user_budget_usd: Math.max(0.01, each / 2), user_budget_period: 'day' });
    const c = openai(h.url, u.key);
    const headers = (user: string) => ({ 'proxy-user': user, 'x-fake-usage': JSON.stringify(USAGE) });
    // The first call's spend is loaded from the log (none), then the call spends past the budget.
    expect(await chat(c, headers('carol'))).toEqual({ status: 'ok' });
    // Its cost is settled when its row is built, after the last byte the client saw: once the row is in the
    // log, the spend is counted (on a busy machine the next call could otherwise arrive first).
    await waitFor('carol’s first row', async () => {
      await h.flushLog();
      const rows = await h.kr.services.logStore.listRequests(
        { account_id: u.accountId, end_user: 'carol' },
        { limit: 1 },
      );
      return rows.items.length > 0 ? true : undefined;
    });
    const refused = await chat(c, headers('carol'));
    expect(refused.status).toBe(429);
    expect(refused.message).toContain('per end user per day');
    expect(await chat(c, headers('dave'))).toEqual({ status: 'ok' });
    await limit(u.keyId, { user_budget_usd: null });
    expect(await chat(c, headers('carol'))).toEqual({ status: 'ok' });
  });

  it('applies on the Anthropic route through its SDK, and not to a key without caps', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { user_rate_limit_rpm: 1 });
    const a = new Anthropic({
      apiKey: 'sk-ant-test-end-users',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': u.key, 'proxy-user': 'erin' },
    });
    const ask = () =>
      a.messages.create({
        model: 'claude-sonnet-4-6',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
      });
    await ask();
    await expect(ask()).rejects.toMatchObject({ status: 429 });
    const free = await h.newUser();
    const c = openai(h.url, free.key);
    for (let i = 0; i < 3; i++) expect(await chat(c, { 'proxy-user': 'erin' })).toEqual({ status: 'ok' });
  });
});

describe('a hard budget per end user on two instances', () => {
  let pair: Pair;
  beforeAll(async () => {
    pair = await startPair('end-users');
  }, 120_000);
  afterAll(() => pair?.close(), 120_000);

  const chats = () => pair.openai.requests.filter((r) => r.url === '/v1/chat/completions').length;

  it('50 concurrent streams from two end users on one key: each held to its budget, refused ones never upstream', async () => {
    const each = price(5, MAX_TOKENS);
    const budget = Math.round(each * 5.5 * 1e6) / 1e6; // five requests' worth per end user
    const r = await pair.onA.post('/keys', {
      name: 'shared product key',
      user_budget_usd: budget,
      user_budget_mode: 'hard',
      user_budget_period: 'day',
    });
    expect(r.status, r.text).toBe(201);
    expect(r.json.key).toMatchObject({ user_budget_usd: budget, user_budget_mode: 'hard', budget_usd: null });
    const keyId = r.json.key.id as string;
    const key = r.json.key.key as string;
    const a = openai(pair.a.url, key);
    const b = openai(pair.b.url, key);
    const headers = (user: string) => ({
      'proxy-user': user,
      'x-fake-event-delay-ms': '100',
      'x-fake-usage': JSON.stringify(USAGE),
    });
    const users = ['alice', 'bob'];
    const before = chats();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        chat(i % 4 < 2 ? a : b, headers(users[i % 2]!), true).then((o) => ({ user: users[i % 2]!, o })),
      ),
    );
    for (const user of users) {
      const mine = results.filter((x) => x.user === user).map((x) => x.o.status);
      expect(mine.filter((s) => s !== 'ok' && s !== 429)).toEqual([]);
      // Exactly the budget's worth each: one end user's spend never takes the other's room.
      expect(mine.filter((s) => s === 'ok').length, user).toBe(5);
    }
    const ok = results.filter((x) => x.o.status === 'ok').length;
    expect(chats() - before).toBe(ok);

    const db = new pg.Client({ connectionString: pair.db.url });
    await db.connect();
    try {
      const spent = await waitFor('all rows', async () => {
        const q = await db.query<{ end_user: string; n: string; s: number }>(
          `SELECT end_user, count(*) AS n, sum(cost_usd)::double precision AS s FROM requests
           WHERE key_id = $1 AND outcome = 'ok' GROUP BY end_user ORDER BY end_user`,
          [keyId],
        );
        return q.rows.reduce((n, x) => n + Number(x.n), 0) === ok ? q.rows : undefined;
      });
      expect(spent.map((x) => x.end_user)).toEqual(users);
      for (const x of spent) {
        expect(x.s).toBeCloseTo(5 * each, 9);
        expect(x.s).toBeLessThanOrEqual(budget);
      }
    } finally {
      await db.end();
    }
    // Both end users spent theirs, on either instance; a third end user still has a whole budget.
    for (const c of [a, b]) {
      for (const user of users) {
        const refused = await chat(c, headers(user), true);
        expect(refused.status).toBe(429);
        expect(refused.message).toContain('per end user');
      }
    }
    expect(await chat(b, headers('carol'), true)).toEqual({ status: 'ok' });
  });
});

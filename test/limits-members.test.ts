/**
 * Limits per member (docs/limits.md, "Per member"): an rpm and a budget on a member of an organization bound
 * the sum of all their keys there, beside each key's own limits, through the official SDKs. On one instance
 * (SQLite): a hard budget stops calls across two keys, the tighter of key and member refuses and says which,
 * a soft budget lets calls in flight through and reports the overshoot, an rpm counts across keys, service
 * keys and other members are not held. On two instances (PostgreSQL + Redis): limits set through one reach
 * the other's warm key cache, and 50 concurrent streams across two keys do not overshoot a hard budget.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, setKeyLimits } from '../src/keys/actions.js';
import { computeCost } from '../src/metering/index.js';
import { setMemberLimits } from '../src/orgs/actions.js';
import type { MemberLimits } from '../src/store/types.js';
import { startPair, waitFor, type Pair } from './helpers/cluster.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

const MAX_TOKENS = 10_000;
// What the fake reports: fewer prompt tokens than keyrelay's estimate of the body, the whole max_tokens.
const USAGE = { prompt_tokens: 5, completion_tokens: MAX_TOKENS, cached_tokens: 0, reasoning_tokens: 0 };
const usageHeaders = { 'x-fake-usage': JSON.stringify(USAGE) };

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
const EACH = price(5, MAX_TOKENS);

const openai = (base: string, key: string) =>
  new OpenAI({
    apiKey: 'sk-test-members',
    baseURL: `${base}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });

interface Outcome {
  status: number | 'ok';
  message?: string;
  code?: string;
}

async function chat(
  c: OpenAI,
  headers: Record<string, string> = usageHeaders,
  stream = false,
): Promise<Outcome> {
  const body = {
    model: 'gpt-4o',
    messages: [{ role: 'user' as const, content: 'Write a long story about relays.' }],
    max_tokens: MAX_TOKENS,
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
    if (err instanceof OpenAI.APIError) {
      const code = err.headers?.get?.('x-keyrelay-error') ?? undefined;
      return { status: err.status ?? 0, message: err.message, code };
    }
    throw err;
  }
}

describe('limits per member on one instance', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  const deps = () => ({ store: h.kr.services.configStore, bus: h.kr.services.bus });
  /** A fresh account with a second key (and a service key) in its personal organization, of which it is owner. */
  async function member() {
    const u = await h.newUser();
    const second = await createKey(deps(), { accountId: u.accountId, name: 'second' });
    const service = await createKey(deps(), { accountId: u.accountId, name: 'ci', service: true });
    const limit = (patch: Partial<MemberLimits>) =>
      setMemberLimits(
        deps(),
        { accountId: u.accountId, orgId: u.accountId, role: 'owner' },
        u.accountId,
        patch,
      );
    return { ...u, keys: [u.key, second.key], secondId: second.view.id, service: service.key, limit };
  }
  /** Waits until the account's `n` rows are in the log, so their cost is counted when the next call comes. */
  async function rows(accountId: string, n: number) {
    await waitFor(`${n} rows`, async () => {
      await h.flushLog();
      const page = await h.kr.services.logStore.listRequests({ account_id: accountId }, { limit: 100 });
      return page.items.length >= n ? true : undefined;
    });
  }

  it('a hard member budget stops calls across both keys at the budget, in OpenAI’s and Anthropic’s error shapes', async () => {
    const m = await member();
    // Cached before the limits are set: the change must evict them.
    for (const k of m.keys) expect(await chat(openai(h.url, k))).toEqual({ status: 'ok' });
    await rows(m.accountId, 2);
    const budget = Math.round(EACH * 4.5 * 1e6) / 1e6; // two more requests' worth after the two above
    const set = await m.limit({ budget_usd: budget, budget_mode: 'hard', budget_period: 'day' });
    expect(set.after).toEqual({
      rate_limit_rpm: null,
      budget_usd: budget,
      budget_period: 'day',
      budget_mode: 'hard',
    });
    const results: Outcome[] = [];
    for (let i = 0; i < 6; i++) results.push(await chat(openai(h.url, m.keys[i % 2]!)));
    expect(results.map((r) => r.status)).toEqual(['ok', 'ok', 429, 429, 429, 429]);
    expect(results[2]!.code).toBe('proxy_budget_exceeded');
    expect(results[2]!.message).toContain(`Budget: $${budget} across this member's keys per day (UTC)`);
    // Anthropic's route answers the same refusal in Anthropic's shape (a call whose bound passes the room).
    const a = new Anthropic({
      apiKey: 'sk-ant-test-members',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': m.keys[1]! },
    });
    const refused = await a.messages
      .create({
        model: 'claude-sonnet-4-6',
        max_tokens: 100_000,
        stream: true,
        messages: [{ role: 'user', content: 'hi' }],
      })
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(429);
    expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: 'error',
      error: { message: expect.stringContaining("across this member's keys") as unknown },
    });
    // A service key of the same account is no member's, so not held; nor is another member.
    expect(await chat(openai(h.url, m.service))).toEqual({ status: 'ok' });
    const other = await member();
    expect(await chat(openai(h.url, other.keys[0]!))).toEqual({ status: 'ok' });
    // The spend counted is the member's two keys', within the budget.
    await h.flushLog();
    const spent = await h.kr.services.logStore.spendSince(m.secondId, '2000-01-01T00:00:00.000Z');
    expect(spent).toBeCloseTo(2 * EACH, 9);
    // Raising the budget lets the member in again at once.
    await m.limit({ budget_usd: budget + 2 * EACH });
    expect(await chat(openai(h.url, m.keys[0]!))).toEqual({ status: 'ok' });
  });

  it('the tighter of the key’s and the member’s limits refuses, and the refusal says which', async () => {
    const m = await member();
    await m.limit({
      budget_usd: Math.round(EACH * 10.5 * 1e6) / 1e6,
      budget_mode: 'hard',
      budget_period: 'month',
    });
    const keyBudget = Math.round(EACH * 1.5 * 1e6) / 1e6;
    await setKeyLimits(deps(), null, m.secondId, {
      budget_usd: keyBudget,
      budget_mode: 'hard',
      budget_period: 'day',
    });
    const second = openai(h.url, m.keys[1]!);
    expect(await chat(second)).toEqual({ status: 'ok' });
    const byKey = await chat(second);
    expect(byKey.status).toBe(429);
    expect(byKey.message).toContain(`Budget: $${keyBudget} per day (UTC)`);
    expect(byKey.message).not.toContain('member');
    // The member's other key still has the member's room.
    expect(await chat(openai(h.url, m.keys[0]!))).toEqual({ status: 'ok' });
  });

  it('a soft member budget lets calls in flight through, reports the overshoot, then refuses as a key’s does', async () => {
    const m = await member();
    const budget = Math.round(EACH * 1.5 * 1e6) / 1e6;
    await m.limit({ budget_usd: budget, budget_mode: 'soft', budget_period: 'day' });
    const slow = { ...usageHeaders, 'x-fake-event-delay-ms': '100' };
    // Four concurrent streams across both keys: none is held back by what the others may cost.
    const four = await Promise.all(
      Array.from({ length: 4 }, (_, i) => chat(openai(h.url, m.keys[i % 2]!), slow, true)),
    );
    expect(four.map((r) => r.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    await rows(m.accountId, 4);
    // Reported: the member's spend past the budget, through the console's reading of it.
    const status = await h.kr.services.configStore.getMemberLimits(m.accountId, m.accountId);
    expect(status?.budget_mode).toBe('soft');
    const { memberSpendSince } = await import('../src/limits/index.js');
    const spent = await memberSpendSince(h.kr.services.configStore, h.kr.services.logStore)(
      m.accountId,
      m.accountId,
      '2000-01-01T00:00:00.000Z',
    );
    expect(spent).toBeCloseTo(4 * EACH, 9);
    expect(spent).toBeGreaterThan(budget);
    const refused = await chat(openai(h.url, m.keys[1]!));
    expect(refused.status).toBe(429);
    expect(refused.message).toContain("across this member's keys per day");
  });

  it('a member rpm counts requests across their keys; their service key and other members are not counted', async () => {
    const m = await member();
    for (const k of m.keys) expect(await chat(openai(h.url, k), {})).toEqual({ status: 'ok' });
    await m.limit({ rate_limit_rpm: 3 });
    const results: Outcome[] = [];
    for (let i = 0; i < 5; i++) results.push(await chat(openai(h.url, m.keys[i % 2]!), {}));
    expect(results.map((r) => r.status)).toEqual(['ok', 'ok', 'ok', 429, 429]);
    expect(results[3]!.code).toBe('proxy_rate_limited');
    expect(results[3]!.message).toContain("3 requests across this member's keys per minute");
    for (let i = 0; i < 3; i++) expect(await chat(openai(h.url, m.service), {})).toEqual({ status: 'ok' });
    // Cleared: the member's keys answer again at once.
    await m.limit({ rate_limit_rpm: null });
    expect(await chat(openai(h.url, m.keys[0]!), {})).toEqual({ status: 'ok' });
  });
});

describe('a hard member budget on two instances', () => {
  let pair: Pair;
  beforeAll(async () => {
    pair = await startPair('members');
  }, 120_000);
  afterAll(() => pair?.close(), 120_000);

  const chats = () => pair.openai.requests.filter((r) => r.url === '/v1/chat/completions').length;

  it('50 concurrent streams across two keys on two instances stop at the member’s budget', async () => {
    const org = await pair.onA.post('/orgs', { name: 'Team' });
    expect(org.status, org.text).toBe(201);
    const orgId = org.json.org.id as string;
    const inOrg = { 'x-keyrelay-org': orgId };
    const keys: string[] = [];
    for (const name of ['laptop', 'agent']) {
      const r = await pair.onA.post('/keys', { name }, inOrg);
      expect(r.status, r.text).toBe(201);
      keys.push(r.json.key.key as string);
    }
    const members = await pair.onA.get(`/orgs/${orgId}/members`);
    const me = members.json.members[0].account_id as string;
    // Both keys warm in both instances' caches (a free listing), which keep a key for a minute: only the
    // change feed or the Redis bus can bring the member's limits to B.
    for (const base of [pair.a.url, pair.b.url])
      for (const k of keys) expect((await openai(base, k).models.list()).data).toBeDefined();
    const budget = Math.round(EACH * 5.5 * 1e6) / 1e6; // five requests' worth
    const set = await pair.onA.patch(`/orgs/${orgId}/members/${me}/limits`, {
      budget_usd: budget,
      budget_mode: 'hard',
      budget_period: 'day',
    });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toMatchObject({
      limits: { budget_usd: budget, budget_mode: 'hard', budget_period: 'day', rate_limit_rpm: null },
      budget: { spent_usd: 0, budget_usd: budget },
    });
    await new Promise((r) => setTimeout(r, 1_000));
    const headers = { ...usageHeaders, 'x-fake-event-delay-ms': '100' };
    const before = chats();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        chat(openai(i % 4 < 2 ? pair.a.url : pair.b.url, keys[i % 2]!), headers, true),
      ),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s !== 'ok' && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 'ok').length).toBe(5);
    const ok = 5;
    // Refused calls never went upstream.
    expect(chats() - before).toBe(ok);
    expect(results.find((r) => r.status === 429)?.message).toContain("across this member's keys");

    const db = new pg.Client({ connectionString: pair.db.url });
    await db.connect();
    try {
      const spent = await waitFor('all rows', async () => {
        const q = await db.query<{ n: string; s: number }>(
          `SELECT count(*) AS n, sum(cost_usd)::double precision AS s FROM requests
           WHERE org_id = $1 AND outcome = 'ok' AND path LIKE '%chat/completions'`,
          [orgId],
        );
        return Number(q.rows[0]!.n) === ok ? q.rows[0]! : undefined;
      });
      expect(spent.s).toBeCloseTo(5 * EACH, 9);
      expect(spent.s).toBeLessThanOrEqual(budget);
    } finally {
      await db.end();
    }
    // The console reports the member's spend on either instance (shared sessions).
    const status = await waitFor('spend in the status', async () => {
      const r = await pair.onB.get(`/orgs/${orgId}/members/${me}/limits`);
      return r.json.budget.spent_usd > 0 ? r.json.budget : undefined;
    });
    expect(status.spent_usd).toBeCloseTo(5 * EACH, 9);
  });
});

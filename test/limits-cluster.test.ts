/**
 * Hard budgets and in-flight limits across two instances on PostgreSQL + Redis: 50 concurrent
 * streaming requests through the OpenAI SDK, spread over both instances, against a hard budget that covers
 * 10 of them. Reservations are taken in Redis by one script, so the settled spend never passes the budget
 * by more than docs/limits.md's bound (here 0: every request names max_tokens and the provider's usage
 * stays within it), and refused requests never reach the fake upstream. A killed instance's in-flight slot
 * lapses within the hold TTL.
 */
import OpenAI from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeCost } from '../src/metering/index.js';
import { startPair, waitFor, type Pair } from './helpers/cluster.js';

const HOLD_TTL_MS = 2_000;
const MAX_TOKENS = 10_000;
// What the fake reports: fewer prompt tokens than keyrelay's estimate of the body, the whole max_tokens.
const USAGE = { prompt_tokens: 5, completion_tokens: MAX_TOKENS, cached_tokens: 0, reasoning_tokens: 0 };

let pair: Pair;
beforeAll(async () => {
  pair = await startPair('hard', {}, { limits: { holdTtlMs: HOLD_TTL_MS } });
}, 120_000);
afterAll(() => pair?.close(), 120_000);

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

async function newKey(limits: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const r = await pair.onA.post('/keys', { name: `k${Date.now()}`, ...limits });
  expect(r.status, r.text).toBe(201);
  return { id: r.json.key.id as string, key: r.json.key.key as string };
}

const client = (base: string, key: string) =>
  new OpenAI({
    apiKey: 'sk-test-cluster',
    baseURL: `${base}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });

async function stream(c: OpenAI, headers: Record<string, string>): Promise<number | 'ok'> {
  try {
    const s = await c.chat.completions.create(
      {
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'Write a long story about relays.' }],
        stream: true,
        max_tokens: MAX_TOKENS,
      },
      { headers },
    );
    for await (const chunk of s) void chunk;
    return 'ok';
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err.status ?? 0;
    throw err;
  }
}

const chats = () => pair.openai.requests.filter((r) => r.url === '/v1/chat/completions').length;

describe('hard budget on two instances', () => {
  it('50 concurrent streams against a budget covering 10: never over the budget, refused ones never upstream', async () => {
    const each = price(5, MAX_TOKENS); // the real cost of one request, from the price library
    const budget = Math.round(each * 10.5 * 1e6) / 1e6;
    const k = await newKey({ budget_usd: budget, budget_mode: 'hard', budget_period: 'day' });
    const a = client(pair.a.url, k.key);
    const b = client(pair.b.url, k.key);
    const headers = { 'x-fake-event-delay-ms': '100', 'x-fake-usage': JSON.stringify(USAGE) };
    const before = chats();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => stream(i % 2 ? a : b, headers)));
    const ok = results.filter((r) => r === 'ok').length;
    const refused = results.filter((r) => r === 429).length;
    expect(ok + refused).toBe(50);
    // Exactly the budget's worth: leases (limits/leases.ts) leave no room stranded on either instance.
    expect(ok).toBe(10);
    // Refused requests never reached upstream.
    expect(chats() - before).toBe(ok);

    // The settled spend, from the shared request log once both instances flushed it.
    const db = new pg.Client({ connectionString: pair.db.url });
    await db.connect();
    try {
      const spent = await waitFor('all rows', async () => {
        const r = await db.query<{ n: string; s: number | null }>(
          `SELECT count(*) AS n, sum(cost_usd)::double precision AS s FROM requests
           WHERE key_id = $1 AND outcome = 'ok'`,
          [k.id],
        );
        return Number(r.rows[0]!.n) === ok ? (r.rows[0]!.s ?? 0) : undefined;
      });
      expect(spent).toBeCloseTo(ok * each, 9);
      // docs/limits.md: with max_tokens given and usage within it, the worst overshoot is 0.
      expect(spent).toBeLessThanOrEqual(budget);
    } finally {
      await db.end();
    }
    // The budget is spent but for half a request: the next one is refused on either instance.
    expect(await stream(a, headers)).toBe(429);
    expect(await stream(b, headers)).toBe(429);
  });

  it('requests in flight are limited across instances; a killed instance’s slot lapses within the hold TTL', async () => {
    const k = await newKey({ max_concurrent: 1 });
    const a = client(pair.a.url, k.key);
    const b = client(pair.b.url, k.key);
    const before = chats();
    // A long stream on B holds the only slot.
    const long = stream(b, { 'x-fake-event-delay-ms': '60000' });
    await waitFor('the stream upstream', () => Promise.resolve(chats() > before ? true : undefined));
    expect(await stream(a, {})).toBe(429);
    // B dies without settling: its slot stays in Redis until its expiry passes.
    pair.b.proc.child.kill('SIGKILL');
    await long.catch(() => null);
    const killedAt = Date.now();
    const freed = await waitFor(
      'the slot to lapse',
      async () => ((await stream(a, {})) === 'ok' ? Date.now() : undefined),
      HOLD_TTL_MS * 5,
      100,
    );
    expect(freed - killedAt).toBeLessThanOrEqual(HOLD_TTL_MS + 1_000);
  });
});

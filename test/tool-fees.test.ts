/**
 * Server-side tool fees and long-context tiers, through the official SDKs: each tool use the provider
 * reports is counted on the row (`tool_uses`) and priced with the price library where it has the rate; a
 * fee it lacks leaves the row `partial`, naming the fee, with the rest of the cost (never $0, never silent).
 * Each expected cost is computed here with the library from the fake's numbers, never copied from keyrelay.
 */
import Anthropic from '@anthropic-ai/sdk';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { DEFAULT_ANTHROPIC_USAGE } from './fakes/anthropic.js';
import { DEFAULT_OPENAI_USAGE } from './fakes/openai.js';
import { DEFAULT_RESPONSES_USAGE } from './fakes/openai-ws.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let user: { key: string; keyId: string; accountId: string };
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  h = await startHarness();
  user = await h.newUser();
  anthropic = new Anthropic({
    apiKey: 'sk-ant-test-tool-fees',
    baseURL: `${h.url}/api/proxy/anthropic`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key },
  });
  openai = new OpenAI({
    apiKey: 'sk-test-tool-fees',
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key },
  });
});
afterAll(() => h.close());

async function rowOf(id: string | null): Promise<RequestLogRow> {
  expect(id).toBeTruthy();
  await h.flushLog();
  const r = await h.kr.services.logStore.getRequest(user.accountId, id!);
  expect(r, `row ${id}`).not.toBeNull();
  return r!;
}

function price(providerId: string, model: string, usage: Record<string, number>): number {
  const r = calcPrice(usage, model, { providerId });
  expect(r, `the library prices ${model}`).not.toBeNull();
  return r!.total_price;
}

/** The fake's Anthropic usage in the library's terms (input_tokens: every prompt token). */
function anthropicUsage(over: Partial<typeof DEFAULT_ANTHROPIC_USAGE> = {}): Record<string, number> {
  const u = { ...DEFAULT_ANTHROPIC_USAGE, ...over };
  return {
    input_tokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
    cache_read_tokens: u.cache_read_input_tokens,
    cache_write_tokens: u.cache_creation_input_tokens,
    output_tokens: u.output_tokens,
  };
}

const WEB_SEARCH = { type: 'web_search_20250305', name: 'web_search' } as const;
const WEB_FETCH = { type: 'web_fetch_20250910', name: 'web_fetch' } as const;
const CODE_EXECUTION = { type: 'code_execution_20250825', name: 'code_execution' } as const;
const SONNET = 'claude-sonnet-4-6';

describe('Anthropic server tools', () => {
  it('prices web searches from usage.server_tool_use at the library’s rate, JSON and streamed, plain and gzip', async () => {
    const expected = price('anthropic', SONNET, { ...anthropicUsage(), web_searches: 3 });
    const tokensOnly = price('anthropic', SONNET, anthropicUsage());
    expect(expected - tokensOnly).toBeCloseTo(0.03, 12); // three searches at the library's $10 per 1,000

    const params = {
      model: SONNET,
      max_tokens: 256,
      messages: [{ role: 'user' as const, content: 'What happened today?' }],
      tools: [WEB_SEARCH],
    };
    const { data: message, response } = await anthropic.messages
      .create(params, { headers: { 'x-fake-tool-calls': '3' } })
      .withResponse();
    expect(message.usage.server_tool_use?.web_search_requests).toBe(3);
    const json = await rowOf(response.headers.get('x-keyrelay-request-id'));
    expect(json).toMatchObject({ tool_uses: { web_searches: 3 }, usage_source: 'provider' });
    expect(json.cost_usd).toBeCloseTo(expected, 12);
    expect(json.price_source).toMatch(/^genai-prices@\d/);

    for (const encoding of ['identity', 'gzip']) {
      const stream = anthropic.messages.stream(params, {
        headers: { 'x-fake-tool-calls': '3', 'x-fake-encoding': encoding === 'gzip' ? 'gzip' : '' },
      });
      const final = await stream.finalMessage();
      expect(final.usage.server_tool_use?.web_search_requests).toBe(3);
      const { response: streamed } = await stream.withResponse();
      const row = await rowOf(streamed.headers.get('x-keyrelay-request-id'));
      expect(row, encoding).toMatchObject({ stream: true, tool_uses: { web_searches: 3 } });
      expect(row.cost_usd).toBeCloseTo(expected, 12);
      expect(row.price_source).toMatch(/^genai-prices@\d/);
    }
  });

  it('counts web fetches, which Anthropic bills only as tokens: not partial', async () => {
    const { response } = await anthropic.messages
      .create(
        {
          model: SONNET,
          max_tokens: 256,
          messages: [{ role: 'user', content: 'Read https://example.com/0' }],
          tools: [WEB_FETCH],
        },
        { headers: { 'x-fake-tool-calls': '2' } },
      )
      .withResponse();
    const row = await rowOf(response.headers.get('x-keyrelay-request-id'));
    expect(row.tool_uses).toEqual({ web_fetches: 2 });
    expect(row.cost_usd).toBeCloseTo(price('anthropic', SONNET, anthropicUsage()), 12);
    expect(row.price_source).toMatch(/^genai-prices@\d/);
  });

  it('marks code execution partial, naming the container fee the library cannot price; never $0', async () => {
    const tokens = price('anthropic', SONNET, { ...anthropicUsage(), web_searches: 1 });
    for (const stream of [false, true]) {
      const params = {
        model: SONNET,
        max_tokens: 256,
        messages: [{ role: 'user' as const, content: 'Compute 2+2, then search for it' }],
        tools: [CODE_EXECUTION, WEB_SEARCH],
      };
      const response = stream
        ? (await anthropic.messages.stream(params).withResponse()).response
        : (await anthropic.messages.create(params).withResponse()).response;
      const row = await rowOf(response.headers.get('x-keyrelay-request-id'));
      expect(row.tool_uses, `stream ${stream}`).toEqual({ web_searches: 1, code_execution_containers: 1 });
      expect(row.price_source).toMatch(
        /^partial: genai-prices@\S+ has no price for code_execution_containers ×1/,
      );
      expect(row.cost_usd).not.toBe(0);
      expect(row.cost_usd).toBeCloseTo(tokens, 12);
    }
  });

  it('gives a row without tool use no tool_uses', async () => {
    const { response } = await anthropic.messages
      .create({ model: SONNET, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] })
      .withResponse();
    const row = await rowOf(response.headers.get('x-keyrelay-request-id'));
    expect(row.tool_uses).toBeNull();
    expect(row.cost_usd).toBeCloseTo(price('anthropic', SONNET, anthropicUsage()), 12);
  });
});

const RESPONSES_TOKENS = {
  input_tokens: DEFAULT_OPENAI_USAGE.prompt_tokens,
  cache_read_tokens: DEFAULT_OPENAI_USAGE.cached_tokens,
  output_tokens: DEFAULT_OPENAI_USAGE.completion_tokens,
};

describe('OpenAI hosted tools', () => {
  it('prices web_search_call and file_search_call items at the library’s rates, JSON and streamed', async () => {
    const expected = price('openai', 'gpt-4o', { ...RESPONSES_TOKENS, web_searches: 2, storage_searches: 2 });
    expect(expected - price('openai', 'gpt-4o', RESPONSES_TOKENS)).toBeCloseTo(0.02 + 0.005, 12);
    const params = {
      model: 'gpt-4o',
      input: 'Search the web and my files',
      tools: [
        { type: 'web_search' as const },
        { type: 'file_search' as const, vector_store_ids: ['vs_fake'] },
      ],
    };
    const { data, response } = await openai.responses
      .create(params, { headers: { 'x-fake-tool-calls': '2' } })
      .withResponse();
    expect(data.output.filter((o) => o.type === 'web_search_call')).toHaveLength(2);
    const json = await rowOf(response.headers.get('x-keyrelay-request-id'));
    expect(json.tool_uses).toEqual({ web_searches: 2, storage_searches: 2 });
    expect(json.cost_usd).toBeCloseTo(expected, 12);
    expect(json.price_source).toMatch(/^genai-prices@\d/);

    const { data: stream, response: streamed } = await openai.responses
      .create({ ...params, stream: true }, { headers: { 'x-fake-tool-calls': '2' } })
      .withResponse();
    for await (const _ of stream) void _;
    const row = await rowOf(streamed.headers.get('x-keyrelay-request-id'));
    expect(row).toMatchObject({ stream: true, tool_uses: { web_searches: 2, storage_searches: 2 } });
    expect(row.cost_usd).toBeCloseTo(expected, 12);
  });

  it('marks code interpreter containers and generated images partial, naming both; never $0', async () => {
    const tokens = price('openai', 'gpt-4o', RESPONSES_TOKENS);
    for (const stream of [false, true]) {
      const { data, response } = await openai.responses
        .create(
          {
            model: 'gpt-4o',
            input: 'Plot it and draw it',
            tools: [{ type: 'code_interpreter', container: { type: 'auto' } }, { type: 'image_generation' }],
            stream,
          },
          { headers: { 'x-fake-tool-calls': '2' } },
        )
        .withResponse();
      if (stream) for await (const _ of data as AsyncIterable<unknown>) void _;
      const row = await rowOf(response.headers.get('x-keyrelay-request-id'));
      // Two calls in one container: one container billed.
      expect(row.tool_uses, `stream ${stream}`).toEqual({
        code_interpreter_containers: 1,
        image_generations: 2,
      });
      expect(row.price_source).toMatch(
        /^partial: genai-prices@\S+ has no price for code_interpreter_containers ×1, image_generations ×2 on gpt-4o/,
      );
      expect(row.cost_usd).not.toBe(0);
      expect(row.cost_usd).toBeCloseTo(tokens, 12);
    }
  });

  it('counts one web search per call of a Chat Completions search model, JSON and streamed', async () => {
    const chatTokens = {
      input_tokens: DEFAULT_OPENAI_USAGE.prompt_tokens,
      cache_read_tokens: DEFAULT_OPENAI_USAGE.cached_tokens,
      output_tokens: DEFAULT_OPENAI_USAGE.completion_tokens,
    };
    // The library prices this one's searches (it matches gpt-4o-mini's entry, which has the rate)…
    const mini = 'gpt-4o-mini-search-preview';
    const { response } = await openai.chat.completions
      .create({ model: mini, messages: [{ role: 'user', content: 'News?' }], web_search_options: {} })
      .withResponse();
    const priced = await rowOf(response.headers.get('x-keyrelay-request-id'));
    expect(priced.tool_uses).toEqual({ web_searches: 1 });
    expect(priced.cost_usd).toBeCloseTo(price('openai', mini, { ...chatTokens, web_searches: 1 }), 12);
    expect(priced.price_source).toMatch(/^genai-prices@\d/);

    // …not this one's: partial, the tokens priced, the search named.
    const full = 'gpt-4o-search-preview';
    const { data: stream, response: streamed } = await openai.chat.completions
      .create({ model: full, messages: [{ role: 'user', content: 'News?' }], stream: true })
      .withResponse();
    for await (const _ of stream) void _;
    const partial = await rowOf(streamed.headers.get('x-keyrelay-request-id'));
    expect(partial.tool_uses).toEqual({ web_searches: 1 });
    expect(partial.price_source).toMatch(
      /^partial: genai-prices@\S+ has no price for web_searches ×1 on gpt-4o-search-preview/,
    );
    expect(partial.cost_usd).toBeCloseTo(price('openai', full, chatTokens), 12);
    expect(partial.cost_usd).toBeGreaterThan(0);
  });

  it('counts hosted tools on a Responses WebSocket', async () => {
    const client = new OpenAI({ apiKey: 'sk-test-tool-fees', baseURL: `${h.url}/api/proxy/openai/v1` });
    const ws = new ResponsesWS(client, { headers: { 'proxy-api-key': user.key } });
    ws.on('error', () => {});
    const done = new Promise<void>((resolve) =>
      ws.on('event', (e) => {
        if (e.type === 'response.completed') resolve();
      }),
    );
    ws.send({
      type: 'response.create',
      model: 'gpt-4o',
      input: 'wsfees',
      tools: [{ type: 'web_search' }, { type: 'image_generation' }],
      fake: { toolCalls: 3 },
    } as never);
    await done;
    ws.close();
    let row: Pick<RequestLogRow, 'tool_uses' | 'price_source' | 'cost_usd'> | undefined;
    for (let i = 0; i < 200 && !row; i++) {
      await h.flushLog();
      const page = await h.kr.services.logStore.listRequests(
        { account_id: user.accountId, search: 'wsfees' },
        { limit: 5 },
      );
      const hit = page.items.find((r) => r.method === 'WS');
      if (hit) row = hit;
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(row).toBeDefined();
    const du = DEFAULT_RESPONSES_USAGE;
    const tokens = {
      input_tokens: du.input_tokens,
      cache_read_tokens: du.input_tokens_details.cached_tokens,
      output_tokens: du.output_tokens,
    };
    expect(row!.tool_uses).toEqual({ web_searches: 3, image_generations: 3 });
    expect(row!.price_source).toMatch(/^partial: .* image_generations ×3 on gpt-4o/);
    expect(row!.cost_usd).toBeCloseTo(price('openai', 'gpt-4o', { ...tokens, web_searches: 3 }), 12);
  });
});

describe('long-context tiers, as the library defines them', () => {
  it('prices an Anthropic request past 200k input tokens at the tier rate for the whole request', async () => {
    // Sonnet 4.5 is the Claude model the library still prices in tiers (4.6 no longer); by its dotted name,
    // which the library matches too, as the SDK warns about the dashed one being retired.
    const TIERED_SONNET = 'claude-sonnet-4.5';
    for (const input of [150_000, 250_000]) {
      const over = { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
      const { response } = await anthropic.messages
        .create(
          {
            model: TIERED_SONNET,
            max_tokens: 64,
            messages: [{ role: 'user', content: 'long' }],
            tools: [WEB_SEARCH],
          },
          { headers: { 'x-fake-usage': JSON.stringify(over) } },
        )
        .withResponse();
      const row = await rowOf(response.headers.get('x-keyrelay-request-id'));
      const usage = { ...anthropicUsage(over), web_searches: 1 };
      expect(row.cost_usd).toBeCloseTo(price('anthropic', TIERED_SONNET, usage), 12);
      // The library's tiers for this model: $3 / $15 per million below 200k, $6 / $22.5 past it.
      const [inRate, outRate] = input > 200_000 ? [6, 22.5] : [3, 15];
      const output = DEFAULT_ANTHROPIC_USAGE.output_tokens;
      expect(row.cost_usd).toBeCloseTo((input * inRate + output * outRate) / 1e6 + 0.01, 12);
    }
  });

  it('prices an OpenAI request past 272k input tokens at the tier rate for the whole request', async () => {
    for (const prompt of [200_000, 300_000]) {
      const { response } = await openai.responses
        .create(
          { model: 'gpt-5.4', input: 'long' },
          { headers: { 'x-fake-usage': JSON.stringify({ prompt_tokens: prompt, cached_tokens: 0 }) } },
        )
        .withResponse();
      const row = await rowOf(response.headers.get('x-keyrelay-request-id'));
      const output = DEFAULT_OPENAI_USAGE.completion_tokens;
      expect(row.cost_usd).toBeCloseTo(
        price('openai', 'gpt-5.4', { input_tokens: prompt, output_tokens: output }),
        12,
      );
      const [inRate, outRate] = prompt > 272_000 ? [5, 22.5] : [2.5, 15];
      expect(row.cost_usd).toBeCloseTo((prompt * inRate + output * outRate) / 1e6, 12);
    }
  });
});

/**
 * The official SDKs, pointed at keyrelay as the README says, get what they get talking to the upstream
 * directly: same results, same typed errors; keyrelay's own refusals raise the SDK's authentication error.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

const openaiVia = (baseURL: string, proxyKey?: string) =>
  new OpenAI({
    apiKey: 'sk-test-canary-openai',
    baseURL,
    maxRetries: 0,
    defaultHeaders: proxyKey ? { 'proxy-api-key': proxyKey } : {},
  });
const anthropicVia = (baseURL: string, proxyKey?: string) =>
  new Anthropic({
    apiKey: 'sk-ant-canary',
    baseURL,
    maxRetries: 0,
    defaultHeaders: proxyKey ? { 'proxy-api-key': proxyKey } : {},
  });

/** Fields that differ between two calls by nature (none in the fakes' deterministic output). */
const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Say hi' }] };
const msg = {
  model: 'claude-sonnet-4-6',
  max_tokens: 100,
  messages: [{ role: 'user' as const, content: 'Say hi' }],
};

describe('OpenAI SDK through keyrelay', () => {
  it('returns the same chat completion as the upstream directly', async () => {
    const direct = await openaiVia(h.openai.url + '/v1').chat.completions.create(chat);
    const proxied = await openaiVia(h.url + '/api/proxy/openai/v1', key).chat.completions.create(chat);
    expect(proxied).toEqual(direct);
  });

  it('streams the same chunks as the upstream directly', async () => {
    const collect = async (client: OpenAI) => {
      const out: unknown[] = [];
      for await (const c of await client.chat.completions.create({ ...chat, stream: true })) out.push(c);
      return out;
    };
    const direct = await collect(openaiVia(h.openai.url + '/v1'));
    const proxied = await collect(openaiVia(h.url + '/api/proxy/openai/v1', key));
    expect(proxied).toEqual(direct);
    expect(proxied.length).toBeGreaterThan(2);
  });

  it('streams with include_usage the same as directly, usage chunk included', async () => {
    const collect = async (client: OpenAI) => {
      const out: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
      const s = await client.chat.completions.create({
        ...chat,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const c of s) out.push(c);
      return out;
    };
    const direct = await collect(openaiVia(h.openai.url + '/v1'));
    const proxied = await collect(openaiVia(h.url + '/api/proxy/openai/v1', key));
    expect(proxied).toEqual(direct);
    expect(proxied.at(-1)?.usage?.prompt_tokens).toBeGreaterThan(0);
  });

  it('lists models and creates embeddings through the same base URL', async () => {
    const client = openaiVia(h.url + '/api/proxy/openai/v1', key);
    const models = await client.models.list();
    expect(models.data.length).toBeGreaterThan(0);
    const emb = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hello' });
    expect(emb.data[0]?.embedding.length).toBeGreaterThan(0);
  });

  it('raises the same typed error for an upstream 429 and 500', async () => {
    const client = openaiVia(h.url + '/api/proxy/openai/v1', key);
    const rate = await client.chat.completions
      .create(chat, { headers: { 'x-fake-status': '429' } })
      .catch((e: unknown) => e);
    expect(rate).toBeInstanceOf(OpenAI.RateLimitError);
    const direct = await openaiVia(h.openai.url + '/v1')
      .chat.completions.create(chat, { headers: { 'x-fake-status': '429' } })
      .catch((e: unknown) => e);
    expect((rate as InstanceType<typeof OpenAI.APIError>).message).toBe(
      (direct as InstanceType<typeof OpenAI.APIError>).message,
    );
    const server = await client.chat.completions
      .create(chat, { headers: { 'x-fake-status': '500' } })
      .catch((e: unknown) => e);
    expect(server).toBeInstanceOf(OpenAI.InternalServerError);
  });

  it.each([
    ['missing', undefined, 'proxy_key_missing'],
    ['invalid', 'kr_notavalidkey', 'proxy_key_invalid'],
  ])(
    'refuses a %s proxy-api-key with an AuthenticationError carrying keyrelay’s message',
    async (_n, k, code) => {
      const err = await openaiVia(h.url + '/api/proxy/openai/v1', k)
        .chat.completions.create(chat)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe(code);
      expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(/proxy-api-key/);
      expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-keyrelay-error')).toBe(code);
    },
  );
});

describe('Anthropic SDK through keyrelay', () => {
  it('prints no deprecation notice for the model the tests and snippets use', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      await anthropicVia(h.url + '/api/proxy/anthropic', key).messages.create(msg);
      expect(warn.mock.calls.flat().join('\n')).not.toMatch(/deprecated/i);
    } finally {
      warn.mockRestore();
    }
  });

  it('returns the same message as the upstream directly', async () => {
    const direct = await anthropicVia(h.anthropic.url).messages.create(msg);
    const proxied = await anthropicVia(h.url + '/api/proxy/anthropic', key).messages.create(msg);
    expect(proxied).toEqual(direct);
  });

  it('streams the same events and final message as directly', async () => {
    const run = async (client: Anthropic) => {
      const events: unknown[] = [];
      const stream = client.messages.stream(msg);
      stream.on('streamEvent', (e) => events.push(e));
      const final = await stream.finalMessage();
      return { events, final };
    };
    const direct = await run(anthropicVia(h.anthropic.url));
    const proxied = await run(anthropicVia(h.url + '/api/proxy/anthropic', key));
    expect(proxied.events).toEqual(direct.events);
    expect(proxied.final).toEqual(direct.final);
    expect(proxied.final.usage.output_tokens).toBeGreaterThan(0);
  });

  it('counts tokens', async () => {
    const r = await anthropicVia(h.url + '/api/proxy/anthropic', key).messages.countTokens({
      model: msg.model,
      messages: msg.messages,
    });
    expect(r.input_tokens).toBeGreaterThan(0);
  });

  it('raises the same typed error for an upstream 429 and 529-style overload', async () => {
    const client = anthropicVia(h.url + '/api/proxy/anthropic', key);
    const rate = await client.messages
      .create(msg, { headers: { 'x-fake-status': '429' } })
      .catch((e: unknown) => e);
    expect(rate).toBeInstanceOf(Anthropic.RateLimitError);
    const over = await client.messages
      .create(msg, { headers: { 'x-fake-status': '529' } })
      .catch((e: unknown) => e);
    expect(over).toBeInstanceOf(Anthropic.APIError);
    expect((over as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
  });

  it('refuses a revoked key with an AuthenticationError carrying keyrelay’s message', async () => {
    const user = await h.newUser();
    const client = anthropicVia(h.url + '/api/proxy/anthropic', user.key);
    await client.messages.create(msg);
    await h.kr.services.configStore.revokeKey(user.keyId, new Date().toISOString());
    await h.kr.services.bus.publish({ type: 'key_changed', key_id: user.keyId });
    const err = await client.messages.create(msg).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((err as InstanceType<typeof Anthropic.APIError>).message).toMatch(/revoked.*proxy_key_revoked/);
  });

  it('answers Claude Code’s unauthenticated HEAD on the base URL without going upstream', async () => {
    const before = h.anthropic.requests.length;
    const { request } = await import('undici');
    const res = await request(h.url + '/api/proxy/anthropic', { method: 'HEAD' });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(h.anthropic.requests.length).toBe(before);
  });
});

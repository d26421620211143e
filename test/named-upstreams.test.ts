/**
 * Named upstreams (KEYRELAY_UPSTREAMS) through the official SDKs, against fakes shaped as each provider
 * documents its API: Azure OpenAI with the `AzureOpenAI` client, OpenRouter and a local server with the
 * `openai` client, an Anthropic-compatible endpoint with `@anthropic-ai/sdk`. Each call is logged under the
 * upstream's name, priced where the price library knows the model (never $0 where it does not), limited by
 * the key's allowlist and rate, and stored without its credential.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { AzureOpenAI } from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setKeyLimits } from '../src/keys/actions.js';
import { computeCost } from '../src/metering/index.js';
import type { KeyLimits } from '../src/store/types.js';
import type { RequestLogRow } from '../src/types.js';
import type { Usage } from '../src/usage/index.js';
import {
  startFakeAnthropicCompatible,
  startFakeAzureOpenAI,
  startFakeOpenRouter,
  startFakeStrictCompatible,
} from './fakes/compatible.js';
import type { FakeUpstream } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let azure: FakeUpstream;
let openrouter: FakeUpstream;
let compat: FakeUpstream;
let local: FakeUpstream;
let user: { key: string; keyId: string; accountId: string };

beforeAll(async () => {
  azure = await startFakeAzureOpenAI({ 'prod-4o': 'gpt-4o-2024-11-20' });
  openrouter = await startFakeOpenRouter();
  compat = await startFakeAnthropicCompatible();
  local = await startFakeStrictCompatible();
  h = await startHarness({
    KEYRELAY_UPSTREAMS: JSON.stringify({
      azure: { shape: 'openai', origin: azure.url, kind: 'azure' },
      openrouter: { shape: 'openai', origin: openrouter.url, kind: 'openrouter' },
      deepseek: { shape: 'anthropic', origin: compat.url },
      vllm: { shape: 'openai', origin: local.url, streamUsage: false },
    }),
  });
  user = await h.newUser();
}, 60_000);

afterAll(async () => {
  await h?.close();
  for (const f of [azure, openrouter, compat, local]) await f?.close();
});

async function row(id: string | null): Promise<RequestLogRow> {
  expect(id).toBeTruthy();
  await h.flushLog();
  const r = await h.kr.services.logStore.getRequest(user.accountId, id!);
  expect(r, `row ${id}`).not.toBeNull();
  return r!;
}

const usageOf = (r: RequestLogRow): Usage => ({
  input_tokens: r.input_tokens,
  output_tokens: r.output_tokens,
  cache_read_tokens: r.cache_read_tokens,
  cache_write_tokens: r.cache_write_tokens,
  reasoning_tokens: r.reasoning_tokens,
  source: 'provider',
  model: null,
});

const limit = (keyId: string, patch: Partial<KeyLimits>) =>
  setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, keyId, patch);

const azureClient = (key: string) =>
  new AzureOpenAI({
    endpoint: `${h.url}/api/proxy/azure`,
    apiKey: 'azure-key-1',
    apiVersion: '2024-10-21',
    deployment: 'prod-4o',
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });

const openrouterClient = (key: string) =>
  new OpenAI({
    baseURL: `${h.url}/api/proxy/openrouter/api/v1`,
    apiKey: 'sk-or-v1-fake',
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key },
  });

describe('Azure OpenAI', () => {
  it('forwards the deployment path, api-version and api-key; prices the model the response names', async () => {
    const { data, response } = await azureClient(user.key)
      .chat.completions.create({ model: 'prod-4o', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(data.model).toBe('gpt-4o-2024-11-20');
    const sent = azure.requests.at(-1)!;
    expect(sent.url).toBe('/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21');
    expect(sent.headers['api-key']).toBe('azure-key-1');
    expect(sent.headers['proxy-api-key']).toBeUndefined();
    const r = await row(response.headers.get('x-keyrelay-request-id'));
    expect(r).toMatchObject({ provider: 'azure', model: 'gpt-4o-2024-11-20', status: 200, outcome: 'ok' });
    expect(r.input_tokens).toBeGreaterThan(0);
    expect(r.cost_usd).toBeGreaterThan(0);
    expect(r.cost_usd).toBeCloseTo(computeCost('azure', 'gpt-4o-2024-11-20', usageOf(r)).cost_usd!, 12);
    // The credential header is redacted in the row, and the key appears nowhere in it.
    expect(r.request_headers['api-key']).not.toBe('azure-key-1');
    expect(JSON.stringify(r)).not.toContain('azure-key-1');
    expect(r.credential_fingerprint).toBeTruthy();
  });

  it('asks a stream for its usage and strips it again: the caller sees Azure’s stream, the row its tokens', async () => {
    const { data: stream, response } = await azureClient(user.key)
      .chat.completions.create({
        model: 'prod-4o',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      })
      .withResponse();
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(JSON.parse(azure.requests.at(-1)!.body.toString()).stream_options).toEqual({
      include_usage: true,
    });
    const r = await row(response.headers.get('x-keyrelay-request-id'));
    expect(r).toMatchObject({ provider: 'azure', model: 'gpt-4o-2024-11-20', stream: true });
    expect(r.output_tokens).toBeGreaterThan(0);
    expect(r.cost_usd).toBeGreaterThan(0);
  });

  it('refuses a second api-key header (who is calling is ambiguous), as a second Authorization', async () => {
    const before = azure.requests.length;
    const res = await request(
      `${h.url}/api/proxy/azure/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21`,
      {
        method: 'POST',
        headers: ['api-key', 'azure-key-1', 'api-key', 'someone-else', 'proxy-api-key', user.key],
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      },
    );
    await res.body.text();
    expect([res.statusCode, res.headers['x-keyrelay-error']]).toEqual([400, 'proxy_bad_request']);
    expect(azure.requests.length).toBe(before);
  });

  it('passes Azure’s own refusal through (a wrong key), logged as an upstream error', async () => {
    const bad = new AzureOpenAI({
      endpoint: `${h.url}/api/proxy/azure`,
      apiKey: 'wrong',
      apiVersion: '2024-10-21',
      deployment: 'prod-4o',
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    await expect(
      bad.chat.completions.create({ model: 'prod-4o', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({ status: 401 });
  });
});

describe('OpenRouter', () => {
  it('prices vendor/model names through the vendor’s entry in the price library', async () => {
    const { data, response } = await openrouterClient(user.key)
      .chat.completions.create({
        model: 'anthropic/claude-sonnet-4-6',
        messages: [{ role: 'user', content: 'hi' }],
      })
      .withResponse();
    expect(data.model).toBe('anthropic/claude-sonnet-4-6');
    expect(openrouter.requests.at(-1)!.url).toBe('/api/v1/chat/completions');
    const r = await row(response.headers.get('x-keyrelay-request-id'));
    expect(r).toMatchObject({ provider: 'openrouter', model: 'anthropic/claude-sonnet-4-6' });
    const expected = computeCost('anthropic', 'claude-sonnet-4-6', usageOf(r)).cost_usd;
    expect(expected).toBeGreaterThan(0);
    expect(r.cost_usd).toBeCloseTo(expected!, 12);
    expect(JSON.stringify(r)).not.toContain('sk-or-v1-fake');
  });

  it('leaves a model no price entry knows unpriced, never $0', async () => {
    const { response } = await openrouterClient(user.key)
      .chat.completions.create({ model: 'acme/unknown-model-7', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    const r = await row(response.headers.get('x-keyrelay-request-id'));
    expect(r.cost_usd).toBeNull();
    expect(r.price_source).toMatch(/^unpriced: /);
  });
});

describe('an Anthropic-compatible endpoint', () => {
  const client = (key: string) =>
    new Anthropic({
      baseURL: `${h.url}/api/proxy/deepseek/anthropic`,
      apiKey: 'sk-compat-1',
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });

  it('is priced where the library knows the model, unpriced where it does not', async () => {
    const known = await client(user.key)
      .messages.create({
        model: 'deepseek-chat',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
      })
      .withResponse();
    expect(compat.requests.at(-1)!.url).toBe('/anthropic/v1/messages');
    const r = await row(known.response.headers.get('x-keyrelay-request-id'));
    expect(r).toMatchObject({ provider: 'deepseek', model: 'deepseek-chat', outcome: 'ok' });
    expect(r.cost_usd).toBeGreaterThan(0);
    expect(JSON.stringify(r)).not.toContain('sk-compat-1');

    const unknown = await client(user.key)
      .messages.create({
        model: 'house-model-1',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
      })
      .withResponse();
    const u = await row(unknown.response.headers.get('x-keyrelay-request-id'));
    expect(u.input_tokens).toBeGreaterThan(0);
    expect(u.cost_usd).toBeNull();
    expect(u.price_source).toMatch(/^unpriced: /);
  });

  it('answers keyrelay’s own refusals in Anthropic’s error shape', async () => {
    const err = await client('kr_not_a_key')
      .messages.create({
        model: 'deepseek-chat',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
  });
});

describe('a local server that refuses stream_options (streamUsage: false)', () => {
  it('streams without asking for usage; the row is unpriced, not $0', async () => {
    const client = new OpenAI({
      baseURL: `${h.url}/api/proxy/vllm/v1`,
      apiKey: 'none',
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'llama-3.1-8b-local', messages: [{ role: 'user', content: 'hi' }], stream: true })
      .withResponse();
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    expect(JSON.parse(local.requests.at(-1)!.body.toString()).stream_options).toBeUndefined();
    const r = await row(response.headers.get('x-keyrelay-request-id'));
    expect(r).toMatchObject({ provider: 'vllm', model: 'llama-3.1-8b-local', outcome: 'ok' });
    expect(r.cost_usd).toBeNull();
  });
});

describe('limits', () => {
  it('a key’s allowlist names named upstreams; its rate counts their calls', async () => {
    const u = await h.newUser();
    await limit(u.keyId, { allowed_providers: ['openrouter'], rate_limit_rpm: 2 });
    const before = azure.requests.length;
    const refused = await azureClient(u.key)
      .chat.completions.create({ model: 'prod-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).headers?.get('x-keyrelay-error')).toBe(
      'proxy_key_forbidden',
    );
    expect(azure.requests.length).toBe(before);
    const ask = () =>
      openrouterClient(u.key).chat.completions.create({
        model: 'anthropic/claude-sonnet-4-6',
        messages: [{ role: 'user', content: 'hi' }],
      });
    await ask();
    await ask();
    await expect(ask()).rejects.toBeInstanceOf(OpenAI.RateLimitError);
  });

  it('refuses an allowlist naming a provider this deployment does not have', async () => {
    const u = await h.newUser();
    await expect(limit(u.keyId, { allowed_providers: ['bedrock'] })).rejects.toMatchObject({
      code: 'invalid_limits',
    });
  });
});

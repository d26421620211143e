/**
 * Every proxied request becomes one log row with exact tokens and cost (streaming included), written
 * behind the response; refused requests with a known key, aborts and upstream failures are logged too.
 */
import { connect } from 'node:net';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';

let h: Harness;
let user: { key: string; keyId: string; accountId: string };

beforeAll(async () => {
  h = await startHarness({ KEYRELAY_IDLE_TIMEOUT_MS: '500' });
  user = await h.newUser();
});
afterAll(() => h.close());

async function call(
  provider: 'openai' | 'anthropic',
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; id: string; text: string }> {
  const path = provider === 'openai' ? '/v1/chat/completions' : '/v1/messages';
  const res = await request(`${h.url}/api/proxy/${provider}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'proxy-api-key': user.key,
      ...(provider === 'openai'
        ? { authorization: 'Bearer sk-canary-openai-123' }
        : { 'x-api-key': 'sk-ant-canary-456', 'anthropic-version': '2023-06-01' }),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, id: String(res.headers['x-keyrelay-request-id']), text };
}

async function row(id: string): Promise<RequestLogRow> {
  await h.flushLog();
  const r = await h.kr.services.logStore.getRequest(user.accountId, id);
  expect(r, `row ${id}`).not.toBeNull();
  return r!;
}

const price = (model: string, provider: string, u: Record<string, number>) =>
  calcPrice(u, model, { providerId: provider })?.total_price;

describe('request log', () => {
  it('records an OpenAI completion with provider usage and the library’s cost', async () => {
    const r = await call('openai', { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
    const log = await row(r.id);
    expect(log).toMatchObject({
      provider: 'openai',
      method: 'POST',
      path: '/v1/chat/completions',
      model: 'gpt-4o',
      stream: false,
      status: 200,
      outcome: 'ok',
      input_tokens: 11,
      cache_read_tokens: 3,
      output_tokens: 7,
      reasoning_tokens: 2,
      usage_source: 'provider',
      key_id: user.keyId,
    });
    expect(log.cost_usd).toBeCloseTo(
      price('gpt-4o', 'openai', { input_tokens: 11, cache_read_tokens: 3, output_tokens: 7 })!,
      12,
    );
    expect(log.price_source).toMatch(/^genai-prices@/);
    expect(log.ttfb_ms).toBeGreaterThan(0);
    expect(log.latency_ms).toBeGreaterThanOrEqual(log.ttfb_ms!);
  });

  it('records usage of an OpenAI stream whose caller did not ask for it', async () => {
    const r = await call('openai', {
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.text).not.toContain('"usage"');
    const log = await row(r.id);
    expect(log).toMatchObject({ stream: true, input_tokens: 11, output_tokens: 7, usage_source: 'provider' });
    expect(log.cost_usd).toBeGreaterThan(0);
  });

  it('records an Anthropic stream with cache reads and writes counted in input', async () => {
    const r = await call('anthropic', {
      model: 'claude-sonnet-4-6',
      max_tokens: 50,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const log = await row(r.id);
    // 25 uncached + 5 cache writes + 10 cache reads.
    expect(log).toMatchObject({
      input_tokens: 40,
      cache_write_tokens: 5,
      cache_read_tokens: 10,
      output_tokens: 15,
      usage_source: 'provider',
    });
    expect(log.cost_usd).toBeCloseTo(
      price('claude-sonnet-4-6', 'anthropic', {
        input_tokens: 40,
        cache_write_tokens: 5,
        cache_read_tokens: 10,
        output_tokens: 15,
      })!,
      12,
    );
  });

  it("prices Anthropic's 1-hour cache writes at their own rate, in a message and in a stream", async () => {
    const usage = {
      input_tokens: 20,
      cache_creation_input_tokens: 3000,
      cache_creation_1h_input_tokens: 1000,
      cache_read_input_tokens: 0,
      output_tokens: 7,
    };
    for (const stream of [false, true]) {
      const r = await call(
        'anthropic',
        { model: 'claude-haiku-4-5', max_tokens: 50, stream, messages: [{ role: 'user', content: 'hi' }] },
        { 'x-fake-usage': JSON.stringify(usage) },
      );
      const log = await row(r.id);
      expect(log).toMatchObject({ input_tokens: 3020, cache_write_tokens: 3000, output_tokens: 7 });
      // claude-haiku-4-5 per million: $1 input, $1.25 5-minute writes, $2 1-hour writes, $5 output.
      expect(log.cost_usd, `stream ${stream}`).toBeCloseTo(
        (20 * 1 + 2000 * 1.25 + 1000 * 2 + 7 * 5) / 1e6,
        12,
      );
    }
  });

  it('leaves cost unknown (null, not 0) for a model the price library does not know', async () => {
    const r = await call('openai', { model: 'my-finetune-xyz', messages: [{ role: 'user', content: 'hi' }] });
    const log = await row(r.id);
    expect(log.input_tokens).toBe(11);
    expect(log.cost_usd).toBeNull();
  });

  it("finds a streamed answer in the console's search by words its deltas split", async () => {
    const email = `search-${Date.now()}@example.com`;
    const searcher = await h.newUser(email);
    const client = new OpenAI({
      apiKey: 'sk-canary-openai-123',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': searcher.key },
    });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'say hi' }] })
      .withResponse();
    let text = '';
    const deltas: string[] = [];
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta.content;
      if (d) deltas.push(d);
      text += d ?? '';
    }
    expect(deltas.slice(0, 2)).toEqual(['Hel', 'lo part1']); // "Hello" reaches the log split in two frames
    expect(text).toMatch(/^Hello part1/);
    const id = response.headers.get('x-keyrelay-request-id')!;
    await h.flushLog();
    const logged = (await h.kr.services.logStore.getRequest(searcher.accountId, id))!;
    expect(logged.response_body).not.toContain('Hello');
    expect(logged).not.toHaveProperty('response_search_text'); // search's own copy: never shown

    const login = await request(`${h.url}/api/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: h.url },
      body: JSON.stringify({ email, password: 'correct horse battery' }),
    });
    expect(login.statusCode).toBe(200);
    await login.body.dump();
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const search = async (q: string) => {
      const res = await request(`${h.url}/api/console/requests?q=${encodeURIComponent(q)}`, {
        headers: { cookie },
      });
      expect(res.statusCode).toBe(200);
      return ((await res.body.json()) as { items: { id: string }[] }).items.map((r) => r.id);
    };
    expect(await search('hello part1')).toContain(id);
    expect(await search(logged.model ?? 'gpt-4o-mini')).toContain(id);
    // The frames after the first are read for their text only: the usage chunk's JSON is not searched.
    expect(logged.response_body).toContain('"prompt_tokens"');
    expect(await search('prompt_tokens')).not.toContain(id);
  });

  it('records end user, session, properties, and drops bodies on request', async () => {
    const r = await call(
      'openai',
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'secret prompt' }] },
      {
        'proxy-user': 'u-42',
        'proxy-session': 's-1',
        'proxy-property-env': 'prod',
        'proxy-log-bodies': 'false',
      },
    );
    const log = await row(r.id);
    expect(log).toMatchObject({
      end_user: 'u-42',
      session: 's-1',
      properties: { env: 'prod' },
      request_body: null,
      response_body: null,
    });
    const withBody = await row((await call('openai', { model: 'gpt-4o', user: 'u-7', messages: [] })).id);
    expect(withBody.end_user).toBe('u-7');
    expect(withBody.request_body).toContain('"u-7"');
    expect(withBody.response_body).toContain('chat.completion');
  });

  it('keys the credential fingerprint, and stores neither credential nor key', async () => {
    const a = await row((await call('openai', { model: 'gpt-4o', messages: [] })).id);
    const b = await row((await call('openai', { model: 'gpt-4o', messages: [] })).id);
    expect(a.credential_fingerprint).toMatch(/^[0-9a-f]{32}$/);
    expect(a.credential_fingerprint).toBe(b.credential_fingerprint);
    const json = JSON.stringify(a);
    expect(json).not.toContain('sk-canary-openai-123');
    expect(json).not.toContain(user.key);
    expect(a.request_headers.authorization).toBe('[redacted]');
    expect(a.request_headers['proxy-api-key']).toBe('[redacted]');
  });

  it('logs an upstream error with its status', async () => {
    const r = await call(
      'anthropic',
      { model: 'claude-sonnet-4-6', max_tokens: 5, messages: [] },
      { 'x-fake-status': '529' },
    );
    expect(r.status).toBe(529);
    expect(await row(r.id)).toMatchObject({ status: 529, outcome: 'upstream_error' });
  });

  it('logs a refused request of a known key, and none for an unknown key', async () => {
    const other = await h.newUser();
    await h.kr.services.configStore.revokeKey(other.keyId, new Date().toISOString());
    await h.kr.services.bus.publish({ type: 'key_changed', key_id: other.keyId });
    const res = await request(`${h.url}/api/proxy/openai/v1/models`, {
      headers: { 'proxy-api-key': other.key },
    });
    await res.body.dump();
    expect(res.statusCode).toBe(401);
    await h.flushLog();
    const refused = await h.kr.services.logStore.getRequest(
      other.accountId,
      String(res.headers['x-keyrelay-request-id']),
    );
    expect(refused).toMatchObject({
      outcome: 'refused',
      status: 401,
      error_code: 'proxy_key_revoked',
      usage_source: 'none',
    });
    const rows = await h.kr.services.logStore.count();
    const { generateKey } = await import('../src/keys/format.js');
    const unknown = await request(`${h.url}/api/proxy/openai/v1/models`, {
      headers: { 'proxy-api-key': generateKey() },
    });
    await unknown.body.dump();
    expect(unknown.statusCode).toBe(401);
    await h.flushLog();
    expect(await h.kr.services.logStore.count()).toBe(rows);
  });

  it('logs an idle-timed-out stream as timeout with partial usage', async () => {
    const res = await call(
      'anthropic',
      { model: 'claude-sonnet-4-6', max_tokens: 50, stream: true, messages: [] },
      { 'x-fake-stall-after-events': '3' },
    ).catch(() => null);
    // The caller's stream ends abnormally; find the row by listing.
    expect(res).toBeNull();
    await h.flushLog();
    const page = await h.kr.services.logStore.listRequests(
      { account_id: user.accountId, outcome: 'timeout' },
      { limit: 5 },
    );
    expect(page.items[0]).toMatchObject({ outcome: 'timeout', usage_source: 'partial', input_tokens: 40 });
  });

  it('logs a stream the client abandoned as client_aborted with partial usage', async () => {
    const url = new URL(h.url);
    const body = JSON.stringify({ model: 'claude-sonnet-4-6', max_tokens: 50, stream: true, messages: [] });
    await new Promise<void>((resolve) => {
      const sock = connect(Number(url.port), url.hostname, () => {
        sock.write(
          `POST /api/proxy/anthropic/v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
            `proxy-api-key: ${user.key}\r\nx-api-key: k\r\nx-fake-event-delay-ms: 100\r\n` +
            `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
      });
      let got = '';
      sock.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.includes('content_block_delta')) {
          sock.destroy();
          resolve();
        }
      });
    });
    await new Promise((r) => setTimeout(r, 200));
    await h.flushLog();
    const page = await h.kr.services.logStore.listRequests(
      { account_id: user.accountId, outcome: 'client_aborted' },
      { limit: 5 },
    );
    expect(page.items[0]).toMatchObject({
      outcome: 'client_aborted',
      status: 200,
      usage_source: 'partial',
      input_tokens: 40,
    });
  });

  it('marks last_used_at on the key after a call, written coalesced', async () => {
    const before = await h.kr.services.configStore.getKey(user.keyId);
    await call('openai', { model: 'gpt-4o', messages: [] });
    await call('openai', { model: 'gpt-4o', messages: [] });
    await h.kr.services.lastUsed.flush();
    const after = await h.kr.services.configStore.getKey(user.keyId);
    expect(after!.last_used_at).not.toBeNull();
    expect(after!.last_used_at! > (before!.last_used_at ?? '')).toBe(true);
  });
});

describe('refusals before the key is read', () => {
  /** A request keyrelay refuses for its target or headers, sent raw (an HTTP client would normalise it). */
  async function refused(target: string, key: string, extra: string[] = []) {
    const res = await rawExchange(
      h.kr.port,
      rawHead(`GET ${target} HTTP/1.1`, [
        `Host: 127.0.0.1:${h.kr.port}`,
        `proxy-api-key: ${key}`,
        ...extra,
        'Connection: close',
      ]),
    );
    expect(res.status).toBe(400);
    expect(res.headers['x-keyrelay-error']).toEqual(['proxy_bad_request']);
    const id = res.headers['x-keyrelay-request-id']?.[0];
    expect(id).toBeTruthy();
    await h.flushLog();
    return id!;
  }

  it('log a refused path or header against a valid key: the request id names that row', async () => {
    const sent = h.openai.requests.length + h.anthropic.requests.length;
    const byPath = await refused('/api/proxy/openai/v1/%2e%2e/models', user.key);
    expect(await h.kr.services.logStore.getRequest(user.accountId, byPath)).toMatchObject({
      id: byPath,
      key_id: user.keyId,
      provider: 'openai',
      path: '/v1/%2e%2e/models',
      status: 400,
      outcome: 'refused',
      error_code: 'proxy_bad_request',
    });
    const byHeader = await refused('/api/proxy/anthropic/v1/models', user.key, [
      'x-api-key: a',
      'x-api-key: b',
    ]);
    expect(await h.kr.services.logStore.getRequest(user.accountId, byHeader)).toMatchObject({
      id: byHeader,
      key_id: user.keyId,
      provider: 'anthropic',
      status: 400,
      error_code: 'proxy_bad_request',
    });
    expect(h.openai.requests.length + h.anthropic.requests.length).toBe(sent); // nothing went upstream
  });

  it('log nothing for an unknown key', async () => {
    const { generateKey } = await import('../src/keys/format.js');
    const rows = await h.kr.services.logStore.count();
    await refused('/api/proxy/openai/v1/%2e%2e/models', generateKey());
    expect(await h.kr.services.logStore.count()).toBe(rows);
  });
});

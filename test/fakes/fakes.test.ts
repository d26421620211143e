import { spawnSync } from 'node:child_process';
import net from 'node:net';
import zlib from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectedBody,
  expectedWireBody,
  jsonResponse,
  sha256,
  startDecoy,
  startFakeAnthropic,
  startFakeOpenAI,
  type FakeUpstream,
} from './index.js';

let oa: FakeUpstream;
let an: FakeUpstream;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  oa = await startFakeOpenAI();
  an = await startFakeAnthropic();
  openai = new OpenAI({ apiKey: 'sk-test', baseURL: `${oa.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'sk-ant-test', baseURL: an.url, maxRetries: 0 });
});
afterAll(async () => {
  await oa.close();
  await an.close();
});

const chatBody = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] };
const msgBody = {
  model: 'claude-sonnet-5-5',
  max_tokens: 64,
  messages: [{ role: 'user' as const, content: 'hi' }],
};

async function raw(
  url: string,
  opts: { method?: 'GET' | 'POST' | 'HEAD'; headers?: Record<string, string>; body?: string } = {},
) {
  const res = await request(url, { method: opts.method ?? 'POST', headers: opts.headers, body: opts.body });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body };
}

describe('fake OpenAI with the official SDK', () => {
  it('answers a chat completion with the requested model and the default usage', async () => {
    const r = await openai.chat.completions.create(chatBody);
    expect(r.model).toBe('gpt-4o-mini');
    expect(r.choices[0]!.message.content).toBe('Hello part1 part2 part3 part4');
    expect(r.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    expect(r.usage!.prompt_tokens_details!.cached_tokens).toBe(3);
    expect(r.usage!.completion_tokens_details!.reasoning_tokens).toBe(2);
    expect(oa.requests.at(-1)!.headers.authorization).toBe('Bearer sk-test');
  });

  it('streams chunks with usage null and a final include_usage chunk', async () => {
    const stream = await openai.chat.completions.create({
      ...chatBody,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks).toHaveLength(1 + 5 + 1 + 1);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({
      prompt_tokens: 11,
      completion_tokens: 7,
      prompt_tokens_details: { cached_tokens: 3 },
    });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(
      'Hello part1 part2 part3 part4',
    );
  });

  it('takes usage numbers from x-fake-usage and the delta count from x-fake-events', async () => {
    const stream = await openai.chat.completions.create(
      { ...chatBody, stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-fake-usage': '{"prompt_tokens":100,"cached_tokens":40}', 'x-fake-events': '2' } },
    );
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks).toHaveLength(1 + 2 + 1 + 1);
    expect(chunks.at(-1)!.usage).toMatchObject({
      prompt_tokens: 100,
      completion_tokens: 7,
      total_tokens: 107,
    });
  });

  it('raises RateLimitError with the provider error body, request id and retry-after on 429', async () => {
    const err = await openai.chat.completions
      .create(chatBody, { headers: { 'x-fake-status': '429' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const e = err as InstanceType<typeof OpenAI.RateLimitError>;
    expect(e.status).toBe(429);
    expect(e.code).toBe('rate_limit_exceeded');
    expect(e.type).toBe('requests');
    expect(e.headers.get('retry-after')).toBe('1');
    expect(e.requestID).toMatch(/^req_/);
  });

  it('raises InternalServerError on 500', async () => {
    const err = await openai.chat.completions
      .create(chatBody, { headers: { 'x-fake-status': '500' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
  });

  it('serves responses (JSON and SSE with usage on response.completed), embeddings and models', async () => {
    const r = await openai.responses.create({ model: 'gpt-4o', input: 'hi' });
    expect(r.output_text).toBe('Hello part1 part2 part3 part4');
    expect(r.usage).toMatchObject({
      input_tokens: 11,
      output_tokens: 7,
      input_tokens_details: { cached_tokens: 3 },
    });
    const stream = await openai.responses.create({ model: 'gpt-4o', input: 'hi', stream: true });
    let completed: OpenAI.Responses.Response | undefined;
    let text = '';
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
    }
    expect(text).toBe('Hello part1 part2 part3 part4');
    expect(completed!.usage!.output_tokens_details.reasoning_tokens).toBe(2);

    const emb = await openai.embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] });
    expect(emb.data).toHaveLength(2);
    expect(emb.data[0]!.embedding).toHaveLength(8);
    expect(emb.usage.prompt_tokens).toBe(11);
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toContain('gpt-4o-mini');
  });

  it('answers unknown paths with a 404 in OpenAI shape', async () => {
    const r = await raw(`${oa.url}/v1/nope`, { body: '{}' });
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body.toString())).toEqual({
      error: {
        message: 'Invalid URL (POST /v1/nope)',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    });
  });
});

describe('fake Anthropic with the official SDK', () => {
  it('answers a message with the requested model and the default usage', async () => {
    const m = await anthropic.messages.create(msgBody);
    expect(m.model).toBe('claude-sonnet-5-5');
    expect(m.content[0]).toEqual({ type: 'text', text: 'Hello part1 part2 part3 part4' });
    expect(m.usage).toMatchObject({
      input_tokens: 25,
      output_tokens: 15,
      cache_creation_input_tokens: 5,
      cache_read_input_tokens: 10,
    });
    // @anthropic-ai/sdk 1.x sends apiKey as `authorization: Bearer`, older versions as x-api-key.
    const h = an.requests.at(-1)!.headers;
    expect(h.authorization ?? h['x-api-key']).toMatch(/sk-ant-test$/);
  });

  it('streams events whose finalMessage carries the cumulative usage', async () => {
    const stream = anthropic.messages.stream(msgBody, {
      headers: { 'x-fake-usage': '{"output_tokens":42}' },
    });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ text: 'Hello part1 part2 part3 part4' });
    expect(final.usage).toMatchObject({ input_tokens: 25, output_tokens: 42, cache_read_input_tokens: 10 });
    expect(types[0]).toBe('message_start');
    expect(types.at(-1)).toBe('message_stop');
    const wire = an.requests.at(-1)!.response!.body.toString();
    expect(wire).toContain('event: ping\ndata: {"type":"ping"}\n\n');
  });

  it('raises RateLimitError with the provider error body and request-id on 429', async () => {
    const err = await anthropic.messages
      .create(msgBody, { headers: { 'x-fake-status': '429' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect(e.error).toEqual({
      type: 'error',
      error: { type: 'rate_limit_error', message: expect.any(String) },
    });
    expect(e.requestID).toMatch(/^req_/);
    expect(e.headers.get('retry-after')).toBe('1');
  });

  it('raises the typed error for 529 overloaded and counts tokens and lists models', async () => {
    const err = await anthropic.messages
      .create(msgBody, { headers: { 'x-fake-status': '529' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
    const count = await anthropic.messages.countTokens({ model: msgBody.model, messages: msgBody.messages });
    expect(count.input_tokens).toBe(25);
    const models = await anthropic.models.list();
    expect(models.data.map((m) => m.id)).toContain('claude-sonnet-5-5');
  });
});

describe('scenarios on the wire', () => {
  const path = '/v1/chat/completions';
  const streamBody = JSON.stringify({ ...chatBody, stream: true, stream_options: { include_usage: true } });

  it('sends exactly the bytes expectedBody computes, recorded in response.body', async () => {
    const headers = { 'content-type': 'application/json', 'x-fake-chunk-size': '7' };
    const r = await raw(`${oa.url}${path}`, { headers, body: streamBody });
    const expected = expectedBody('openai', { path, headers, body: streamBody });
    expect(sha256(r.body)).toBe(sha256(expected));
    expect(sha256(oa.requests.at(-1)!.response!.body)).toBe(sha256(expected));
    expect(r.body.toString().endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it.each(['gzip', 'br', 'deflate', 'zstd'] as const)(
    'compresses with %s and sets content-encoding',
    async (enc) => {
      const headers = { 'x-fake-encoding': enc, 'x-fake-chunk-size': '5' };
      const r = await raw(`${an.url}/v1/messages`, {
        headers,
        body: JSON.stringify({ ...msgBody, stream: true }),
      });
      expect(r.headers['content-encoding']).toBe(enc);
      const decoded =
        enc === 'gzip'
          ? zlib.gunzipSync(r.body)
          : enc === 'br'
            ? zlib.brotliDecompressSync(r.body)
            : enc === 'deflate'
              ? zlib.inflateSync(r.body)
              : spawnSync('zstd', ['-d', '-c', '-q'], { input: r.body }).stdout;
      const input = { path: '/v1/messages', headers, body: JSON.stringify({ ...msgBody, stream: true }) };
      expect(decoded.equals(expectedBody('anthropic', input))).toBe(true);
      expect(r.body.equals(await expectedWireBody('anthropic', input))).toBe(true);
    },
  );

  it('drops the socket after N events, leaving a truncated stream and a closed socket', async () => {
    const before = oa.socketsClosed.length;
    const res = await request(`${oa.url}${path}`, {
      method: 'POST',
      headers: { 'x-fake-drop-after-events': '2' },
      body: streamBody,
    });
    await expect(res.body.text()).rejects.toThrow();
    const rec = oa.requests.at(-1)!;
    expect(rec.response!.outcome).toBe('dropped');
    expect(rec.aborted).toBe(false);
    expect(rec.response!.body.toString().match(/^data: /gm)).toHaveLength(2);
    expect(oa.socketsClosed.length).toBeGreaterThan(before);
  });

  it('stalls after N events with the socket open, and records the client leaving as aborted', async () => {
    const ac = new AbortController();
    const res = await request(`${oa.url}${path}`, {
      method: 'POST',
      headers: { 'x-fake-stall-after-events': '1' },
      body: streamBody,
      signal: ac.signal,
    });
    const first = await new Promise<Buffer>((resolve) => res.body.once('data', resolve));
    expect(first.toString()).toContain('chat.completion.chunk');
    const rec = oa.requests.at(-1)!;
    expect(rec.response!.outcome).toBeUndefined();
    ac.abort();
    await expect(res.body.text()).rejects.toThrow();
    await expect.poll(() => rec.response!.outcome).toBe('stalled');
    expect(rec.aborted).toBe(true);
  });

  it('redirects, sets extra headers verbatim, answers HEAD / and survives a non-JSON body', async () => {
    const redirect = await raw(`${oa.url}${path}`, {
      headers: { 'x-fake-redirect': 'http://127.0.0.1:9/x' },
      body: '{}',
    });
    expect(redirect.status).toBe(307);
    expect(redirect.headers.location).toBe('http://127.0.0.1:9/x');
    const extra = JSON.stringify({
      'set-cookie': ['a=1', 'b=2'],
      'alt-svc': 'h3=":443"',
      connection: 'x-foo',
      'x-foo': 'bar',
    });
    const r = await raw(`${an.url}/v1/messages`, {
      headers: { 'x-fake-set-headers': extra },
      body: JSON.stringify(msgBody),
    });
    expect(r.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(r.headers['x-foo']).toBe('bar');
    const head = await raw(`${oa.url}/`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    const bad = await raw(`${oa.url}${path}`, { body: '\u0000not json' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body.toString()).error.type).toBe('invalid_request_error');
    const badA = await raw(`${an.url}/v1/messages`, { body: 'nope' });
    expect(JSON.parse(badA.body.toString())).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error' },
    });
  });

  it('records raw headers, including duplicates, as received', async () => {
    await new Promise<void>((resolve, reject) => {
      const s = net.connect(oa.port, '127.0.0.1', () => {
        s.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Dup: 1\r\nX-Dup: 2\r\nConnection: close\r\n\r\n');
      });
      s.on('data', () => undefined);
      s.on('end', resolve);
      s.on('error', reject);
    });
    const rec = oa.requests.at(-1)!;
    expect(rec.rawHeaders).toEqual(['Host', 'x', 'X-Dup', '1', 'X-Dup', '2', 'Connection', 'close']);
  });

  it('delays the first byte', async () => {
    const t0 = Date.now();
    await raw(`${oa.url}/v1/models`, { method: 'GET', headers: { 'x-fake-first-byte-delay-ms': '150' } });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
  });
});

describe('custom answers', () => {
  it('lets a test answer a request itself through respond, falling back otherwise', async () => {
    const fake = await startFakeOpenAI({
      respond: (req) => (req.path === '/v1/custom' ? jsonResponse(201, {}, { ok: true }) : undefined),
    });
    const custom = await raw(`${fake.url}/v1/custom`, { body: '{}' });
    expect(custom.status).toBe(201);
    expect(JSON.parse(custom.body.toString())).toEqual({ ok: true });
    const models = await raw(`${fake.url}/v1/models`, { method: 'GET' });
    expect(models.status).toBe(200);
    await fake.close();
  });
});

describe('decoy', () => {
  it('counts every TCP connection it receives', async () => {
    const decoy = await startDecoy();
    expect(decoy.connections).toBe(0);
    const r = await raw(`${decoy.url}/v1/chat/completions`, { body: '{}' });
    expect(r.status).toBe(599);
    expect(decoy.connections).toBe(1);
    await decoy.close();
  });
});

/**
 * Responses: bodies stream back byte-for-byte and unbuffered, events reach the caller as soon as
 * upstream sends them, compressed bodies pass as sent, and the one documented rewrite (OpenAI stream usage)
 * leaves the caller with exactly the bytes it would have got directly.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedBody, sha256, type FakeProvider } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

const ROUTES: Record<FakeProvider, { path: string; headers: Record<string, string> }> = {
  openai: { path: '/v1/chat/completions', headers: { authorization: 'Bearer sk-test-stream' } },
  anthropic: {
    path: '/v1/messages',
    headers: { 'x-api-key': 'sk-ant-stream', 'anthropic-version': '2023-06-01' },
  },
};

function streamBody(provider: FakeProvider, extra: Record<string, unknown> = {}): string {
  const messages = [{ role: 'user', content: `stream test ${Math.random()}` }];
  return provider === 'openai'
    ? JSON.stringify({ model: 'gpt-4o-mini', messages, stream: true, ...extra })
    : JSON.stringify({ model: 'claude-sonnet-4-6', max_tokens: 64, messages, stream: true, ...extra });
}

/** POSTs through keyrelay and returns the raw (still encoded) bytes the caller received. */
async function proxied(provider: FakeProvider, body: string, headers: Record<string, string> = {}) {
  const fake = provider === 'openai' ? h.openai : h.anthropic;
  const before = fake.requests.length;
  const res = await request(`${h.url}/api/proxy/${provider}${ROUTES[provider].path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'proxy-api-key': key,
      ...ROUTES[provider].headers,
      ...headers,
    },
    body,
  });
  const bytes = Buffer.from(await res.body.arrayBuffer());
  const rec = fake.requests[before]!;
  expect(rec).toBeDefined();
  return { res, bytes, rec };
}

describe.each(['openai', 'anthropic'] as const)('%s stream', (provider) => {
  // OpenAI with include_usage already asked for: keyrelay forwards it untouched, so no rewrite applies.
  const extra = provider === 'openai' ? { stream_options: { include_usage: true } } : {};

  it.each([undefined, 1, 3, 7, 64])(
    'reaches the caller byte-identical when upstream writes %s-byte pieces',
    async (size) => {
      const body = streamBody(provider, extra);
      const { res, bytes, rec } = await proxied(
        provider,
        body,
        size ? { 'x-fake-chunk-size': String(size) } : {},
      );
      expect(res.statusCode).toBe(200);
      expect(rec.body.toString()).toBe(body);
      expect(rec.response?.outcome).toBe('complete');
      expect(sha256(bytes)).toBe(sha256(rec.response!.body));
      expect(bytes.toString()).toContain(provider === 'openai' ? '"usage":{' : 'message_stop');
    },
  );

  it.each(['gzip', 'br', 'zstd', 'deflate'])(
    'passes a %s-encoded stream through as the compressed bytes sent',
    async (encoding) => {
      const body = streamBody(provider, extra);
      const { res, bytes, rec } = await proxied(provider, body, {
        'x-fake-encoding': encoding,
        'x-fake-chunk-size': '5',
      });
      expect(res.headers['content-encoding']).toBe(encoding);
      expect(sha256(bytes)).toBe(sha256(rec.response!.body));
    },
  );
});

describe.each(['openai', 'anthropic'] as const)('%s non-streamed response', (provider) => {
  it.each([undefined, 'gzip', 'br', 'zstd'])(
    'reaches the caller byte-identical (encoding: %s)',
    async (encoding) => {
      const body = streamBody(provider, { stream: false });
      const headers: Record<string, string> = encoding ? { 'x-fake-encoding': encoding } : {};
      const { res, bytes, rec } = await proxied(provider, body, headers);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-encoding']).toBe(encoding);
      expect(res.headers['content-length']).toBe(String(rec.response!.body.length));
      expect(sha256(bytes)).toBe(sha256(rec.response!.body));
    },
  );
});

describe('OpenAI stream without include_usage (keyrelay asks upstream for usage, then strips it)', () => {
  it.each([undefined, 1, 7])(
    'gives the caller exactly the bytes of a stream without usage, with upstream %s-byte pieces',
    async (size) => {
      const body = streamBody('openai');
      const headers: Record<string, string> = size ? { 'x-fake-chunk-size': String(size) } : {};
      const { res, bytes, rec } = await proxied('openai', body, headers);
      expect(res.statusCode).toBe(200);
      const sent = JSON.parse(rec.body.toString()) as { stream_options?: { include_usage?: boolean } };
      expect(sent.stream_options?.include_usage).toBe(true);
      expect(rec.response!.body.toString()).toContain('"usage":null');
      const expected = expectedBody('openai', { path: '/v1/chat/completions', headers, body });
      expect(bytes.toString()).toBe(expected.toString());
      expect(bytes.toString()).not.toContain('usage');
    },
  );

  it('keeps the caller’s stream_options members and still strips what it added', async () => {
    const body = streamBody('openai', { stream_options: { include_obfuscation: false } });
    const { bytes, rec } = await proxied('openai', body);
    const sent = JSON.parse(rec.body.toString()) as { stream_options?: Record<string, unknown> };
    expect(sent.stream_options).toEqual({ include_obfuscation: false, include_usage: true });
    expect(bytes.toString()).toBe(expectedBody('openai', { path: '/v1/chat/completions', body }).toString());
  });

  it.each(['gzip', 'br', 'zstd'])(
    'decodes a %s stream to strip usage and says so (no content-encoding)',
    async (encoding) => {
      const body = streamBody('openai');
      const headers = { 'x-fake-encoding': encoding };
      const { res, bytes } = await proxied('openai', body, headers);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(bytes.toString()).toBe(
        expectedBody('openai', { path: '/v1/chat/completions', headers, body }).toString(),
      );
    },
  );
});

describe('event timing', () => {
  it.each(['openai', 'anthropic'] as const)(
    'delivers each %s event before upstream sends the next one',
    async (provider) => {
      const delay = 400;
      const res = await request(`${h.url}/api/proxy/${provider}${ROUTES[provider].path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'proxy-api-key': key,
          ...ROUTES[provider].headers,
          'x-fake-event-delay-ms': String(delay),
          'x-fake-events': '3',
        },
        body: streamBody(provider, provider === 'openai' ? { stream_options: { include_usage: true } } : {}),
      });
      // Arrival time of each complete event (an event ends with a blank line).
      const arrivals: number[] = [];
      let text = '';
      for await (const chunk of res.body) {
        text += (chunk as Buffer).toString();
        const events = text.split('\n\n').length - 1;
        while (arrivals.length < events) arrivals.push(Date.now());
      }
      expect(arrivals.length).toBeGreaterThanOrEqual(5);
      // Upstream pauses `delay` ms between events; had keyrelay held any back, two would arrive together
      // (within a few ms). The bound leaves room for one event reaching a busy test process late and the
      // next on time: a loaded CI machine once made such a gap 109 ms of the 300 then paused.
      for (let i = 1; i < arrivals.length; i++) {
        expect(arrivals[i]! - arrivals[i - 1]!).toBeGreaterThan(delay / 4);
      }
    },
  );
});

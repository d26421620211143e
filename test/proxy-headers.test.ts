/**
 * Headers in both directions: what keyrelay consumes or drops, and what crosses byte-for-byte
 * (raw name case, value and order). Requests go out on raw sockets because undici will not send hop-by-hop
 * headers, and the caller's view is read raw so the exact response header lines can be checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead, type RawResponse } from './helpers/raw-http.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

/** Header lines that must not reach upstream (name as sent). */
const DROPPED: [string, string][] = [
  ['Proxy-User', 'end-user-42'],
  ['proxy-session', 'sess-1'],
  ['Proxy-Property-Team', 'search'],
  ['proxy-log-bodies', 'false'],
  ['Proxy-Foo', 'bar'],
  ['Cookie', 'kr_session=abc; other=1'],
  ['Connection', 'keep-alive, X-Hop-Named'],
  ['X-Hop-Named', 'named in Connection'],
  ['Keep-Alive', 'timeout=5, max=100'],
  ['TE', 'trailers'],
  ['Trailer', 'X-Checksum'],
  ['Upgrade', 'websocket'],
  ['Proxy-Connection', 'keep-alive'],
  ['Proxy-Authorization', 'Basic Zm9vOmJhcg=='],
  ['Forwarded', 'for=203.0.113.7;proto=https;host=evil.example'],
  ['X-Forwarded-For', '203.0.113.7'],
  ['X-Forwarded-Host', 'evil.example'],
  ['X-Forwarded-Proto', 'https'],
];

/** Header lines that must reach upstream exactly as sent (name case and value), in the caller's order. */
const FORWARDED: [string, string][] = [
  ['Authorization', 'Bearer sk-test-Forwarded-AbC_09'],
  ['x-api-key', 'sk-ant-api03-Exact_Value-0123'],
  ['Anthropic-Version', '2023-06-01'],
  ['anthropic-beta', 'prompt-caching-2024-07-31,output-128k-2025-02-19'],
  ['OpenAI-Organization', 'org-AbC123'],
  ['OpenAI-Project', 'proj_XyZ'],
  ['Idempotency-Key', 'stainless-python-retry-1f2e3d'],
  ['User-Agent', 'OpenAI/Python 1.99.0  (extra  spaces kept)'],
  ['X-Stainless-Lang', 'python'],
  ['x-stainless-retry-count', '0'],
  ['X-Stainless-Runtime-Version', '3.12.4'],
  ['X-Custom-Header_Odd', 'Value; with=odd "chars" \t and\ttabs'],
  ['Accept-Encoding', 'gzip, deflate, br, zstd'],
  ['Content-Type', 'application/json; charset=utf-8'],
];

async function sendAll(
  provider: 'openai' | 'anthropic',
): Promise<{ res: RawResponse; rec: RecordedRequest }> {
  const fake = provider === 'openai' ? h.openai : h.anthropic;
  const before = fake.requests.length;
  const body = '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}';
  const lines = [
    'Host: client-facing.example:443',
    `proxy-api-key: ${key}`,
    ...DROPPED.map(([n, v]) => `${n}: ${v}`),
    ...FORWARDED.map(([n, v]) => `${n}: ${v}`),
    `Content-Length: ${body.length}`,
  ];
  const path = provider === 'openai' ? '/v1/chat/completions' : '/v1/messages';
  const res = await rawExchange(
    h.kr.port,
    rawHead(`POST /api/proxy/${provider}${path} HTTP/1.1`, lines) + body,
  );
  const rec = fake.requests[before]!;
  return { res, rec };
}

describe.each(['openai', 'anthropic'] as const)('%s request headers', (provider) => {
  let rec: RecordedRequest;
  let res: RawResponse;
  beforeAll(async () => {
    ({ res, rec } = await sendAll(provider));
  });

  it('is answered by upstream', () => {
    expect(res.status).toBe(200);
    expect(rec).toBeDefined();
  });

  it.each(DROPPED.map(([n]) => n))('does not forward %s', (name) => {
    const lower = name.toLowerCase();
    if (lower === 'connection') {
      // undici may add its own connection management; the caller's tokens must not be what arrives.
      expect(rec.headers.connection ?? '').not.toMatch(/x-hop-named/i);
      return;
    }
    expect(rec.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase())).not.toContain(lower);
  });

  it('does not forward proxy-api-key, and sends the configured upstream as Host', () => {
    const names = rec.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names).not.toContain('proxy-api-key');
    expect(rec.rawHeaders.join('\n')).not.toContain(key);
    const fake = provider === 'openai' ? h.openai : h.anthropic;
    expect(rec.headers.host).toBe(`127.0.0.1:${fake.port}`);
    expect(names.filter((n) => n === 'host')).toHaveLength(1);
  });

  it.each(FORWARDED)('forwards %s byte-for-byte (name case and value)', (name, value) => {
    const pairs: [string, string][] = [];
    for (let i = 0; i < rec.rawHeaders.length; i += 2)
      pairs.push([rec.rawHeaders[i]!, rec.rawHeaders[i + 1]!]);
    expect(pairs.filter(([n]) => n.toLowerCase() === name.toLowerCase())).toEqual([[name, value.trim()]]);
  });

  it('keeps the caller’s order of forwarded headers', () => {
    const wanted = new Set(FORWARDED.map(([n]) => n));
    const order = rec.rawHeaders.filter((n, i) => i % 2 === 0 && wanted.has(n));
    expect(order).toEqual(FORWARDED.map(([n]) => n));
  });
});

describe('an upgrade request', () => {
  it('does not forward Upgrade or Connection: Upgrade, and is answered as a plain request', async () => {
    const before = h.openai.requests.length;
    const res = await rawExchange(
      h.kr.port,
      rawHead('GET /api/proxy/openai/v1/models HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Connection: Upgrade',
        'Upgrade: websocket',
      ]),
    );
    expect(res.status).toBe(200);
    const rec = h.openai.requests[before]!;
    expect(rec.headers.upgrade).toBeUndefined();
    expect(rec.headers.connection ?? '').not.toMatch(/upgrade/i);
  });
});

describe('response headers', () => {
  const setHeaders = {
    'set-cookie': ['__cf_bm=abc; Path=/; HttpOnly', 'other=1'],
    'alt-svc': 'h3=":443"; ma=86400',
    connection: 'X-Resp-Hop',
    'x-resp-hop': 'named in Connection',
    'keep-alive': 'timeout=5',
    'proxy-authenticate': 'Basic realm="x"',
    'anthropic-ratelimit-requests-limit': '50',
    'anthropic-ratelimit-tokens-remaining': '39000',
    'retry-after': '7',
    'X-Upstream-Custom': 'Keep  This',
    'x-keyrelay-request-id': 'spoofed-by-upstream',
  };

  async function get(provider: 'openai' | 'anthropic', extra: string[] = []): Promise<RawResponse> {
    const path = provider === 'openai' ? '/v1/chat/completions' : '/v1/messages';
    const body = '{"model":"m","messages":[],"max_tokens":5,"stream":true}';
    return rawExchange(
      h.kr.port,
      rawHead(`POST /api/proxy/${provider}${path} HTTP/1.1`, [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Content-Type: application/json',
        `x-fake-set-headers: ${JSON.stringify(setHeaders)}`,
        ...extra,
        `Content-Length: ${body.length}`,
        'Connection: close',
      ]) + body,
    );
  }

  it.each(['openai', 'anthropic'] as const)(
    'drops set-cookie, alt-svc and hop-by-hop headers from %s responses',
    async (provider) => {
      const res = await get(provider);
      expect(res.status).toBe(200);
      expect(res.complete).toBe(true);
      for (const name of ['set-cookie', 'alt-svc', 'x-resp-hop', 'keep-alive', 'proxy-authenticate']) {
        expect(res.headers[name], name).toBeUndefined();
      }
      expect(res.headers.connection?.join() ?? '').not.toMatch(/x-resp-hop/i);
      // Node re-frames the stream: exactly one transfer-encoding, and no content-length alongside it.
      expect(res.headers['transfer-encoding']).toEqual(['chunked']);
      expect(res.headers['content-length']).toBeUndefined();
    },
  );

  it.each(['openai', 'anthropic'] as const)(
    'passes the other %s response headers through unchanged',
    async (provider) => {
      const res = await get(provider);
      expect(res.headers['anthropic-ratelimit-requests-limit']).toEqual(['50']);
      expect(res.headers['anthropic-ratelimit-tokens-remaining']).toEqual(['39000']);
      expect(res.headers['retry-after']).toEqual(['7']);
      expect(res.headers['x-upstream-custom']).toEqual(['Keep  This']);
      expect(res.headers['content-type']?.[0]).toContain('text/event-stream');
      expect(res.headers['x-keyrelay-request-id']).toHaveLength(1);
      expect(res.headers['x-keyrelay-request-id']).not.toEqual(['spoofed-by-upstream']);
      if (provider === 'openai') {
        expect(res.headers['x-request-id']?.[0]).toMatch(/^req_/);
        expect(res.headers['openai-processing-ms']).toEqual(['12']);
      }
    },
  );

  it('keeps an upstream content-length on a non-streamed response', async () => {
    const res = await rawExchange(
      h.kr.port,
      rawHead('GET /api/proxy/openai/v1/models HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Connection: close',
      ]),
    );
    expect(res.status).toBe(200);
    expect(res.complete).toBe(true);
    expect(res.headers['content-length']).toEqual([String(res.body.length)]);
    expect(res.headers['transfer-encoding']).toBeUndefined();
  });

  it('puts x-keyrelay-request-id on proxied, upstream-error, refused and probe responses, unique each time', async () => {
    const ids: string[] = [];
    const requests = [
      ['GET /api/proxy/openai/v1/models HTTP/1.1', `proxy-api-key: ${key}`],
      ['GET /api/proxy/openai/v1/models HTTP/1.1', `proxy-api-key: ${key}`, 'x-fake-status: 500'],
      ['GET /api/proxy/anthropic/v1/models HTTP/1.1', `proxy-api-key: ${key}`, 'x-fake-status: 429'],
      ['GET /api/proxy/openai/v1/models HTTP/1.1'],
      ['GET /api/proxy/openai/v1/%2e%2e/x HTTP/1.1', `proxy-api-key: ${key}`],
      ['GET /api/proxy/nope/v1/models HTTP/1.1', `proxy-api-key: ${key}`],
      ['HEAD /api/proxy/anthropic/ HTTP/1.1'],
    ];
    const statuses: number[] = [];
    for (const [line, ...extra] of requests) {
      const res = await rawExchange(
        h.kr.port,
        rawHead(line!, ['Host: keyrelay.test', ...extra, 'Connection: close']),
      );
      statuses.push(res.status);
      expect(res.headers['x-keyrelay-request-id'], line).toHaveLength(1);
      ids.push(res.headers['x-keyrelay-request-id']![0]!);
    }
    expect(statuses).toEqual([200, 500, 429, 401, 400, 404, 200]);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

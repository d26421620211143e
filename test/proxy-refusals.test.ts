/**
 * The upstream origin is configuration, never derived from the request. Every target that could
 * steer keyrelay elsewhere is refused with 400 `proxy_bad_request` in the route's provider shape, before
 * anything is sent: neither a decoy named in the attack nor the configured (recording) upstream sees a thing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDecoy, type Decoy } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead, type RawResponse } from './helpers/raw-http.js';

let h: Harness;
let key: string;
let decoy: Decoy;
let d: string; // the decoy's host:port, as an attacker would write it

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
  decoy = await startDecoy();
  d = `127.0.0.1:${decoy.port}`;
});
afterAll(async () => {
  await h.close();
  await decoy.close();
});

function send(target: string, extraLines: string[] = [], method = 'GET'): Promise<RawResponse> {
  return rawExchange(
    h.kr.port,
    rawHead(`${method} ${target} HTTP/1.1`, [
      `Host: 127.0.0.1:${h.kr.port}`,
      `proxy-api-key: ${key}`,
      'Authorization: Bearer sk-test-refusal',
      ...extraLines,
      'Connection: close',
    ]),
  );
}

function expectRefused(res: RawResponse, provider: 'openai' | 'anthropic'): void {
  expect(res.status).toBe(400);
  expect(res.headers['x-keyrelay-error']).toEqual(['proxy_bad_request']);
  expect(res.headers['x-keyrelay-request-id']?.[0]).toBeTruthy();
  const body = JSON.parse(res.body.toString()) as Record<string, unknown>;
  if (provider === 'openai') {
    expect(body).toMatchObject({ error: { type: 'keyrelay_error', code: 'proxy_bad_request' } });
  } else {
    expect(body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect((body.error as { message: string }).message).toContain('(proxy_bad_request)');
  }
}

/** Path suffixes after `/api/proxy/<provider>`; `D` is replaced by the decoy's host:port. */
const PATH_CORPUS = [
  '//D/v1/models',
  '//D',
  '/\\D/v1/models',
  '/\\\\D/v1/models',
  '/v1\\..\\..\\D',
  '/..',
  '/../../D/v1/models',
  '/v1/../../D/v1/models',
  '/v1/./models',
  '/./v1/models',
  '/v1/models/..',
  '/%2e%2e/D/v1/models',
  '/%2E%2E/D/v1/models',
  '/%2e%2E/D',
  '/.%2e/D',
  '/%2e./D',
  '/%2e/v1/models',
  '/v1/%2E/models',
  '/%252e%252e/D',
  '/%25252e%25252e/D',
  '/%252E%252e/D',
  '/%2f%2fD/v1/models',
  '/%2F%2FD/v1/models',
  '/v1%2f..%2f..%2fD',
  '/v1/models%2f..',
  '/%252f%252fD',
  '/%5cD/v1/models',
  '/%5C%5CD/v1/models',
  '/v1/%5c..%5c..%5cD',
  '/%255cD',
  '/v1/models%00',
  '/v1/models%0d%0aHost:%20D',
  '/v1/models%09',
  '/v1/models%7f',
  '/v1//models',
  '/v1/models#@D',
  '/v1/%zz',
];

const corpus = PATH_CORPUS.map((p) => p.replaceAll('D', '__DECOY__'));

describe('refused request targets', () => {
  it.each(['openai', 'anthropic'] as const)(
    'refuses every %s path in the traversal corpus with 400, sending nothing',
    async (provider) => {
      const fake = provider === 'openai' ? h.openai : h.anthropic;
      const before = fake.requests.length;
      for (const path of corpus) {
        const target = `/api/proxy/${provider}${path.replaceAll('__DECOY__', d)}`;
        const res = await send(target);
        expect.soft(res.status, target).toBe(400);
        expectRefused(res, provider);
      }
      expect(fake.requests.length).toBe(before);
      expect(decoy.connections).toBe(0);
    },
  );

  it.each([
    ['absolute-form naming the decoy', () => `http://${d}/api/proxy/openai/v1/models`],
    [
      'absolute-form naming keyrelay itself',
      () => `http://127.0.0.1:${h.kr.port}/api/proxy/openai/v1/models`,
    ],
    ['absolute-form https', () => `https://${d}/v1/models`],
    ['a leading // outside the proxy prefix', () => `//${d}/api/proxy/openai/v1/models`],
  ])('refuses %s with 400 and contacts nothing', async (_name, target) => {
    const before = h.openai.requests.length;
    const res = await send(target());
    expectRefused(res, 'openai');
    expect(h.openai.requests.length).toBe(before);
    expect(decoy.connections).toBe(0);
  });

  it('refuses an authority-form target (Node rejects it before any handler) and contacts nothing', async () => {
    const res = await send(d);
    expect(res.status).toBe(400);
    expect(decoy.connections).toBe(0);
  });

  it('refuses a request with two Host headers with 400 proxy_bad_request', async () => {
    const before = h.openai.requests.length;
    const res = await rawExchange(
      h.kr.port,
      rawHead('GET /api/proxy/openai/v1/models HTTP/1.1', [
        `Host: 127.0.0.1:${h.kr.port}`,
        `Host: ${d}`,
        `proxy-api-key: ${key}`,
        'Connection: close',
      ]),
    );
    expectRefused(res, 'openai');
    expect(h.openai.requests.length).toBe(before);
    expect(decoy.connections).toBe(0);
  });

  it.each([
    ['proxy-api-key', () => `proxy-api-key: ${key}`],
    ['authorization', () => 'Authorization: Bearer sk-other'],
    ['x-api-key', () => 'X-Api-Key: sk-ant-other'],
  ])('refuses a duplicate %s header with 400 proxy_bad_request', async (_name, line) => {
    for (const provider of ['openai', 'anthropic'] as const) {
      const fake = provider === 'openai' ? h.openai : h.anthropic;
      const before = fake.requests.length;
      const res = await send(`/api/proxy/${provider}/v1/models`, [
        line(),
        line().replace(/: .*/, ': second-value'),
      ]);
      expectRefused(res, provider);
      expect(fake.requests.length).toBe(before);
    }
  });

  it('refuses duplicate credentials that differ only in name case', async () => {
    const before = h.openai.requests.length;
    const res = await send('/api/proxy/openai/v1/models', [`Proxy-API-Key: ${key}`]);
    expectRefused(res, 'openai');
    expect(h.openai.requests.length).toBe(before);
  });

  it('refuses a request with both Content-Length and Transfer-Encoding before it reaches anything', async () => {
    const before = h.openai.requests.length;
    const smuggled = 'GET /api/proxy/openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n';
    const res = await rawExchange(
      h.kr.port,
      rawHead('POST /api/proxy/openai/v1/embeddings HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        `Content-Length: ${smuggled.length + 5}`,
        'Transfer-Encoding: chunked',
        'Connection: close',
      ]) + `0\r\n\r\n${smuggled}`,
    );
    expect(res.status).toBe(400);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.openai.requests.length).toBe(before);
  });

  it('still forwards an ordinary path with legal encodings to the configured upstream only', async () => {
    const before = h.openai.requests.length;
    const res = await send('/api/proxy/openai/v1/models/gpt-4o-mini%3Aft%2Dx?x=%2e%2e&y=a%2Fb');
    expect(res.status).not.toBe(400);
    expect(h.openai.requests.length).toBe(before + 1);
    expect(h.openai.requests[before]!.url).toBe('/v1/models/gpt-4o-mini%3Aft%2Dx?x=%2e%2e&y=a%2Fb');
    expect(decoy.connections).toBe(0);
  });
});

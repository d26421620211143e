/**
 * Request bodies are forwarded as received (no re-serialisation, binary-safe), any method, with
 * path and query string kept exactly.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

async function lastOpenAIRequestAfter(before: number) {
  await h.openai.waitForRequests(before + 1);
  return h.openai.requests[before]!;
}

describe('request bodies', () => {
  it('forwards a binary multipart upload byte-for-byte with its boundary', async () => {
    const boundary = '----keyrelayBoundary7MA4YWxkTrZu0gW';
    const file = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(200_000)]);
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n`),
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="d.jsonl"\r\n`),
      Buffer.from('Content-Type: application/octet-stream\r\n\r\n'),
      file,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const before = h.openai.requests.length;
    const res = await request(`${h.url}/api/proxy/openai/v1/files`, {
      method: 'POST',
      headers: { 'proxy-api-key': key, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
    });
    await res.body.dump();
    const rec = await lastOpenAIRequestAfter(before);
    expect(rec.method).toBe('POST');
    expect(rec.url).toBe('/v1/files');
    expect(rec.headers['content-type']).toBe(`multipart/form-data; boundary=${boundary}`);
    expect(rec.body.length).toBe(body.length);
    expect(sha256(rec.body)).toBe(sha256(body));
  });

  it('forwards a chunked request body as the same bytes', async () => {
    const parts = [randomBytes(1000), Buffer.from('\r\n0\r\n\r\n'), randomBytes(77)];
    const chunked = Buffer.concat([
      ...parts.flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]),
      Buffer.from('0\r\n\r\n'),
    ]);
    const before = h.openai.requests.length;
    const res = await rawExchange(
      h.kr.port,
      Buffer.concat([
        Buffer.from(
          rawHead('PUT /api/proxy/openai/v1/uploads/up_1/parts HTTP/1.1', [
            'Host: keyrelay.test',
            `proxy-api-key: ${key}`,
            'Content-Type: application/octet-stream',
            'Transfer-Encoding: chunked',
            'Connection: close',
          ]),
        ),
        chunked,
      ]),
    );
    expect(res.status).toBe(404); // the fake has no such route; what matters is what it received
    const rec = await lastOpenAIRequestAfter(before);
    expect(rec.method).toBe('PUT');
    expect(sha256(rec.body)).toBe(sha256(Buffer.concat(parts)));
  });

  it('forwards JSON as sent: whitespace, key order, number spelling and invalid JSON untouched', async () => {
    const bodies = [
      '{ "model" : "gpt-4o-mini" ,\n\t"messages":[] , "temperature":1.0e0, "z":"\\u00e9", "a":1 }',
      '{"model":"gpt-4o-mini","model":"dup","messages":[]}',
      '{not json',
      '[1,2,3]',
    ];
    for (const body of bodies) {
      const before = h.openai.requests.length;
      const res = await request(`${h.url}/api/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: { 'proxy-api-key': key, 'content-type': 'application/json' },
        body,
      });
      await res.body.dump();
      expect((await lastOpenAIRequestAfter(before)).body.toString()).toBe(body);
    }
  });

  it.each(['GET', 'DELETE', 'OPTIONS'])(
    'forwards a %s without a body as one without a body',
    async (method) => {
      const before = h.openai.requests.length;
      const res = await rawExchange(
        h.kr.port,
        rawHead(`${method} /api/proxy/openai/v1/models HTTP/1.1`, [
          'Host: keyrelay.test',
          `proxy-api-key: ${key}`,
          'Connection: close',
        ]),
      );
      expect(res.status).toBeLessThan(500);
      const rec = await lastOpenAIRequestAfter(before);
      expect(rec.method).toBe(method);
      expect(rec.body.length).toBe(0);
      expect(rec.headers['transfer-encoding']).toBeUndefined();
      expect(Number(rec.headers['content-length'] ?? 0)).toBe(0);
    },
  );

  it('forwards an empty POST body as empty', async () => {
    const before = h.anthropic.requests.length;
    const res = await request(`${h.url}/api/proxy/anthropic/v1/messages/batches/b_1/cancel`, {
      method: 'POST',
      headers: { 'proxy-api-key': key },
    });
    await res.body.dump();
    await h.anthropic.waitForRequests(before + 1);
    const rec = h.anthropic.requests[before]!;
    expect(rec.body.length).toBe(0);
    expect(rec.url).toBe('/v1/messages/batches/b_1/cancel');
  });
});

describe('paths and query strings', () => {
  it.each([
    '/v1/models',
    '/v1/models?limit=20&after=model_1',
    '/v1/models?a=1&a=2&b=%20x+y&c=%2B&d=&e&f=%C3%A9&g=a%2Fb',
    "/v1/models?q=~!$'()*,;:@/?&empty=&=v",
    '/v1/models?x=%2e%2e%2F..%2f&y=%5C',
    '/v1/models/ft:gpt-4o-mini:org:custom:abc123',
    '/v1/models/ft%3Agpt-4o-mini%3Aorg',
    '/v1/files/file-abc/content',
    '/v1/models/',
  ])('forwards %s to upstream exactly', async (path) => {
    const before = h.openai.requests.length;
    const res = await rawExchange(
      h.kr.port,
      rawHead(`GET /api/proxy/openai${path} HTTP/1.1`, [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Connection: close',
      ]),
    );
    expect(res.status).not.toBe(400);
    expect((await lastOpenAIRequestAfter(before)).url).toBe(path);
  });

  it('forwards to the upstream root for /api/proxy/anthropic with a query', async () => {
    const before = h.anthropic.requests.length;
    const res = await rawExchange(
      h.kr.port,
      rawHead('GET /api/proxy/anthropic?x=1 HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Connection: close',
      ]),
    );
    expect(res.status).toBeLessThan(500);
    await h.anthropic.waitForRequests(before + 1);
    expect(h.anthropic.requests[before]!.url).toBe('/?x=1');
  });
});

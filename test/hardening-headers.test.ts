/**
 * Every answer of keyrelay's own carries `x-content-type-options: nosniff` (proxy
 * refusals, console errors, health and metrics, the connection-level refusals), and the console's CSP
 * forbids plugins (`object-src 'none'`).
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

async function headersOf(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
) {
  const res = await request(`${h.url}${path}`, init);
  await res.body.dump();
  return { status: res.statusCode, headers: res.headers };
}

describe('nosniff on keyrelay’s own answers', () => {
  it.each([
    ['proxy: missing key', '/api/proxy/openai/v1/chat/completions', 401],
    ['proxy: unknown provider', '/api/proxy/nope/v1/x', 404],
    ['console API: not found', '/api/console/nope', 404],
    ['console API: not signed in', '/api/console/keys', 401],
    ['health', '/healthz', 200],
    ['metrics', '/metrics', 200],
  ])('%s', async (_name, path, status) => {
    const res = await headersOf(path);
    expect(res.status).toBe(status);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('refusals before any route (431, 400 for HTTP/1.0 with Transfer-Encoding)', async () => {
    const many = rawHead('GET /healthz HTTP/1.1', [
      'Host: x',
      ...Array.from({ length: 150 }, (_, i) => `x-${i}: 1`),
    ]);
    const te = rawHead('POST /healthz HTTP/1.0', ['Host: x', 'Transfer-Encoding: chunked']) + '0\r\n\r\n';
    for (const [raw, status] of [
      [many, 431],
      [te, 400],
    ] as const) {
      const res = await rawExchange(h.kr.port, raw);
      expect(res.status).toBe(status);
      expect(res.headers['x-content-type-options']).toEqual(['nosniff']);
    }
  });
});

describe('console CSP', () => {
  it("has object-src 'none'", async () => {
    const res = await headersOf('/api/console/nope');
    const csp = String(res.headers['content-security-policy']);
    expect(csp.split(/;\s*/)).toContain("object-src 'none'");
  });
});

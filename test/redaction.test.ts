/**
 * What the request log keeps of headers and query strings holds no credential, whatever
 * the header or parameter is called; `proxy_*` spellings are never forwarded, and `proxy_api_key` is
 * refused rather than taken (or passed on) as a key.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let user: { key: string; accountId: string };
let other: { key: string };

beforeAll(async () => {
  h = await startHarness();
  user = await h.newUser();
  other = await h.newUser();
});
afterAll(() => h.close());

const CHAT = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });

async function call(path: string, headers: Record<string, string>) {
  const res = await request(`${h.url}/api/proxy/openai${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: CHAT,
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

const OPENAI_KEY = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789';
const ANTHROPIC_KEY = 'sk-ant-api03-ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210';
const RANDOM_TOKEN = 'q8Zr2LwX0pTb7VnKc4YhJm1SdGf6RaEu9Oi3Nl5';
const GOOGLE_KEY = 'AIzaSyD-1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTu';

describe('request log redaction', () => {
  it('redacts credential-named headers of any spelling, and credential-looking values in any header', async () => {
    const named: Record<string, string> = {
      apikey: 'plain-secret-1',
      'x-apikey': 'plain-secret-2',
      api_key: 'plain-secret-3',
      x_api_key: 'plain-secret-4',
      bearer: 'plain-secret-5',
      password: 'plain-secret-6',
      auth: 'plain-secret-7',
      'x-auth': 'plain-secret-8',
      authentication: 'plain-secret-9',
      credential: 'plain-secret-10',
      credentials: 'plain-secret-11',
      'x-private_key': 'plain-secret-12',
    };
    const byValue: Record<string, string> = {
      'x-note': `Bearer ${RANDOM_TOKEN}`,
      'x-custom-one': OPENAI_KEY,
      'x-custom-two': `prefix ${ANTHROPIC_KEY} suffix`,
      'x-forward-for-me': other.key,
      'x-random': RANDOM_TOKEN,
      'x-jwt': 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
    };
    const benign: Record<string, string> = {
      'x-request-id': '4bf92f3577b34da6a3ce929d0e0e4736',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      'x-trace-uuid': '550e8400-e29b-41d4-a716-446655440000',
      'user-agent': 'OpenAI/Python 1.99.0 (linux; x86_64) async:asyncio',
    };
    const r = await call(
      `/v1/chat/completions?api_key=${RANDOM_TOKEN}&key=${GOOGLE_KEY}&x=${OPENAI_KEY}&q=hello`,
      {
        'proxy-api-key': user.key,
        authorization: `Bearer ${OPENAI_KEY}`,
        ...named,
        ...byValue,
        ...benign,
      },
    );
    expect(r.status).toBe(200);
    const stored = await row(r.id);
    const json = JSON.stringify(stored);
    for (const secret of [
      ...Object.values(named),
      OPENAI_KEY,
      ANTHROPIC_KEY,
      RANDOM_TOKEN,
      GOOGLE_KEY,
      other.key,
      user.key,
    ]) {
      expect(json, secret).not.toContain(secret);
    }
    expect(json).not.toContain('dozjgNryP4J3jVmNHl0w5N');
    for (const name of Object.keys(named)) expect(stored.request_headers[name], name).toBe('[redacted]');
    expect(stored.request_headers['x-custom-two']).toBe('prefix [redacted] suffix');
    for (const [name, value] of Object.entries(benign))
      expect(stored.request_headers[name], name).toBe(value);
    expect(stored.path).toBe('/v1/chat/completions?api_key=[redacted]&key=[redacted]&x=[redacted]&q=hello');
    // Upstream got everything as sent (only keyrelay's own headers are not forwarded).
    const sent = h.openai.requests.at(-1)!;
    expect(sent.url).toContain(`api_key=${RANDOM_TOKEN}`);
    expect(sent.headers['x-custom-one']).toBe(OPENAI_KEY);
  });

  it('redacts a bare query item (no `=`) and a query name that is itself a credential', async () => {
    const canary = `sk-CANARY-${RANDOM_TOKEN}`;
    const r = await call(
      `/v1/chat/completions?${canary}&${other.key}&q=hello&${encodeURIComponent(OPENAI_KEY)}=1&flag`,
      { 'proxy-api-key': user.key },
    );
    expect(r.status).toBe(200);
    const stored = await row(r.id);
    const json = JSON.stringify(stored);
    for (const secret of [canary, RANDOM_TOKEN, other.key, OPENAI_KEY])
      expect(json, secret).not.toContain(secret);
    expect(stored.path).toBe('/v1/chat/completions?[redacted]&[redacted]&q=hello&[redacted]&flag');
    expect(h.openai.requests.at(-1)!.url).toContain(canary);
  });

  it('never forwards proxy_* headers, and refuses proxy_api_key instead of taking or passing it', async () => {
    const before = h.openai.requests.length;
    const ok = await call('/v1/chat/completions', {
      'proxy-api-key': user.key,
      proxy_user: 'alice',
      proxy_log_bodies: 'false',
    });
    expect(ok.status).toBe(200);
    const sent = h.openai.requests.at(-1)!;
    expect(Object.keys(sent.headers).filter((n) => n.startsWith('proxy'))).toEqual([]);

    for (const headers of <Array<Record<string, string>>>[
      { proxy_api_key: other.key },
      { 'proxy-api-key': user.key, proxy_api_key: other.key },
      { 'proxy-api-key': user.key, PROXY_API_KEY: other.key },
    ]) {
      const refused = await call('/v1/chat/completions', headers);
      expect(refused.status).toBe(400);
      expect(refused.text).toContain('proxy_bad_request');
      expect(refused.text).not.toContain(other.key);
    }
    expect(h.openai.requests.length).toBe(before + 1);
  });
});

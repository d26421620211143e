/**
 * Provider credentials as the console shows them: by keyed fingerprint only, with the owner's label, spend
 * and requests, and the rate-limit headroom the provider reported on its latest response (OpenAI
 * `x-ratelimit-*`, Anthropic `anthropic-ratelimit-*`), from calls made through the official SDKs.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let cookie: string;
let otherCookie: string;
const OPENAI_KEY = 'sk-proj-credentialTestAAAAAAAAAAAAAAAA';
const ANTHROPIC_KEY = 'sk-ant-api03-credentialTestBBBBBBBBBBBB';

async function login(email: string): Promise<string> {
  const res = await request(`${h.url}/api/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify({ email, password: 'correct horse battery' }),
  });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
  return String(res.headers['set-cookie']).split(';')[0]!;
}

interface Credential {
  fingerprint: string;
  label: string | null;
  requests: number;
  errors: number;
  cost_usd: number;
  headroom: {
    seen_at: string;
    provider: string;
    limits: { name: string; limit: number | null; remaining: number | null; reset: string | null }[];
  } | null;
}

async function api(method: string, path: string, as = cookie, body?: unknown) {
  const res = await request(`${h.url}/api/console${path}`, {
    method: method as 'GET',
    headers: {
      cookie: as,
      origin: h.url,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: JSON.parse(text) as Record<string, unknown> };
}

beforeAll(async () => {
  h = await startHarness();
  const user = await h.newUser('cred@example.com');
  await h.newUser('cred-other@example.com');
  cookie = await login('cred@example.com');
  otherCookie = await login('cred-other@example.com');
  const openai = new OpenAI({
    apiKey: OPENAI_KEY,
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key },
  });
  const anthropic = new Anthropic({
    apiKey: ANTHROPIC_KEY,
    baseURL: `${h.url}/api/proxy/anthropic`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key },
  });
  const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] };
  await openai.chat.completions.create(chat);
  await openai.chat.completions.create(chat);
  // The provider's 429 carries its rate-limit headers (test/fakes: as documented).
  await expect(
    openai.chat.completions.create(chat, { headers: { 'x-fake-status': '429' } }),
  ).rejects.toThrow();
  await expect(
    anthropic.messages.create(
      { model: 'claude-sonnet-4-6', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-fake-status': '429' } },
    ),
  ).rejects.toThrow();
  await h.flushLog();
});
afterAll(() => h.close());

describe('provider credentials', () => {
  it('lists each credential by fingerprint with its requests and its latest rate-limit headroom', async () => {
    const r = await api('GET', '/credentials');
    expect(r.status).toBe(200);
    expect(r.text).not.toContain('credentialTest');
    const list = r.json.credentials as Credential[];
    expect(list).toHaveLength(2);
    const byProvider = new Map(list.map((c) => [c.headroom?.provider, c]));
    expect(byProvider.get('openai')).toMatchObject({
      label: null,
      requests: 3,
      errors: 1,
      headroom: { limits: [{ name: 'requests', limit: 3, remaining: 0, reset: '20s' }] },
    });
    expect(byProvider.get('anthropic')).toMatchObject({
      requests: 1,
      headroom: { limits: [{ name: 'requests', limit: 50, remaining: 0, reset: '2026-01-01T00:00:01Z' }] },
    });
    for (const c of list) expect(c.fingerprint).toMatch(/^[0-9a-f]{32}$/);
  });

  it("keeps the owner's label, for that account only, and removes it with null", async () => {
    const [first] = (await api('GET', '/credentials')).json.credentials as Credential[];
    const fp = first!.fingerprint;
    expect(
      (await api('PUT', `/credentials/${fp}/label`, cookie, { label: '  prod OpenAI key ' })).status,
    ).toBe(200);
    const labelled = (await api('GET', '/credentials')).json.credentials as Credential[];
    expect(labelled.find((c) => c.fingerprint === fp)!.label).toBe('prod OpenAI key');
    expect((await api('GET', '/credentials', otherCookie)).json.credentials).toEqual([]);
    await api('PUT', `/credentials/${fp}/label`, cookie, { label: null });
    const cleared = (await api('GET', '/credentials')).json.credentials as Credential[];
    expect(cleared.find((c) => c.fingerprint === fp)!.label).toBeNull();
  });

  it('refuses an empty or overlong label, an odd fingerprint and a bad range, clearly', async () => {
    for (const body of [{ label: '' }, { label: 'x'.repeat(101) }, {}, { label: 'ok', extra: 1 }]) {
      const r = await api('PUT', '/credentials/abc/label', cookie, body);
      expect([r.status, (r.json.error as { code: string }).code]).toEqual([400, 'invalid_request']);
    }
    expect((await api('PUT', '/credentials/a%20b/label', cookie, { label: 'x' })).status).toBe(400);
    const r = await api('GET', '/credentials?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z');
    expect((r.json.error as { code: string }).code).toBe('invalid_range');
    expect((await api('GET', '/credentials?since=yesterday')).status).toBe(400);
    expect((await api('GET', '/credentials', '')).status).toBe(401);
  });
});

/**
 * Read-only API tokens as a script uses them: created in the console and shown once, stored hashed, read
 * what their scopes cover (every path of the served OpenAPI document), refused clearly for writes, other
 * routes and once revoked.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_TOKEN_PATTERN } from '../src/keys/api-tokens.js';
import { ensureConsoleBuilt, launchBrowser, screenshotBothWidths } from './helpers/browser.js';
import { callProxy } from './helpers/cluster.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let cookie: string;
let otherCookie: string;

async function login(email: string): Promise<string> {
  const res = await request(`${h.url}/api/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify({ email, password: 'correct horse battery' }),
  });
  await res.body.dump();
  return String(res.headers['set-cookie']).split(';')[0]!;
}

async function call(method: string, path: string, auth: { cookie?: string; token?: string }, body?: unknown) {
  const headers: Record<string, string> = { origin: h.url };
  if (auth.cookie) headers.cookie = auth.cookie;
  if (auth.token) headers.authorization = `Bearer ${auth.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(`${h.url}/api/console${path}`, {
    method: method as 'GET',
    headers,
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // CSV
  }
  return { status: res.statusCode, text, json, code: (json.error as { code?: string } | undefined)?.code };
}

async function newToken(scopes: string[], as = cookie): Promise<{ id: string; secret: string }> {
  const r = await call('POST', '/api-tokens', { cookie: as }, { name: `script ${scopes.join('+')}`, scopes });
  expect(r.status, r.text).toBe(201);
  return { id: (r.json.token as { id: string }).id, secret: r.json.secret as string };
}

beforeAll(async () => {
  h = await startHarness();
  const user = await h.newUser('tokens@example.com');
  await h.newUser('tokens-other@example.com');
  cookie = await login('tokens@example.com');
  otherCookie = await login('tokens-other@example.com');
  expect((await callProxy(h.url, user.key)).status).toBe(200);
  // A call in a session, for the session paths.
  const inSession = await request(`${h.url}/api/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'proxy-api-key': user.key,
      'proxy-session': 'tokens-run',
      authorization: 'Bearer sk-canary-openai-123',
    },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await inSession.body.dump();
  expect(inSession.statusCode).toBe(200);
  await h.flushLog();
});
afterAll(() => h.close());

describe('API tokens', () => {
  it('are shown once at creation and stored only as a hash', async () => {
    const { id, secret } = await newToken(['usage']);
    expect(secret).toMatch(API_TOKEN_PATTERN);
    const list = await call('GET', '/api-tokens', { cookie });
    expect(list.text).not.toContain(secret);
    expect(list.json.tokens).toEqual([
      {
        id,
        name: 'script usage',
        hint: `${secret.slice(0, 8)}…${secret.slice(-4)}`,
        scopes: ['usage'],
        created_at: expect.any(String),
        revoked_at: null,
      },
    ]);
    for (const file of ['keyrelay.db', 'keyrelay.db-wal'].map((f) => join(h.dataDir, f)))
      if (existsSync(file)) expect(readFileSync(file).includes(secret)).toBe(false);
  });

  it('read every path of the served OpenAPI document', async () => {
    const doc = await call('GET', '/openapi.json', {});
    expect(doc.status).toBe(200);
    expect(doc.json.openapi).toBe('3.1.0');
    const { secret } = await newToken(['usage', 'requests', 'export']);
    const listed = await call('GET', '/requests?limit=1', { token: secret });
    const rowId = (listed.json.items as { id: string }[])[0]!.id;
    const paths = Object.keys(doc.json.paths as object);
    expect(paths.sort()).toEqual(
      [
        '/credentials',
        '/requests',
        '/requests/export',
        '/requests/{id}',
        '/sessions',
        '/sessions/detail',
        '/usage/breakdown',
        '/usage/series',
        '/usage/series/split',
      ].sort(),
    );
    const required: Record<string, string> = {
      '/requests/export': '?format=csv',
      '/sessions/detail': '?session=tokens-run',
      '/usage/series/split': '?split_by=session',
    };
    for (const p of paths) {
      const path = p.replace('{id}', rowId) + (required[p] ?? '');
      const r = await call('GET', path, { token: secret });
      expect(r.status, `${p}: ${r.text.slice(0, 200)}`).toBe(200);
    }
  });

  it('read only what their scopes cover, and never write', async () => {
    const { secret } = await newToken(['usage', 'export']);
    expect((await call('GET', '/usage/breakdown', { token: secret })).status).toBe(200);
    const csv = await call('GET', '/requests/export?format=csv', { token: secret });
    expect([csv.status, csv.text.split('\r\n').length]).toEqual([200, 4]);
    expect((await call('GET', '/requests', { token: secret })).code).toBe('token_scope');
    expect((await call('GET', '/keys', { token: secret })).code).toBe('token_scope');
    expect((await call('GET', '/api-tokens', { token: secret })).code).toBe('token_scope');
    const write = await call('POST', '/keys', { token: secret }, { name: 'from a script' });
    expect([write.status, write.code]).toEqual([403, 'token_read_only']);
    expect(
      (await call('POST', '/api-tokens', { token: secret }, { name: 'x', scopes: ['usage'] })).code,
    ).toBe('token_read_only');
    // Nothing was made.
    expect(((await call('GET', '/keys', { cookie })).json.keys as unknown[]).length).toBe(1);
    // A token is never ignored in favour of a session cookie sent with it.
    expect((await call('GET', '/keys', { token: secret, cookie })).code).toBe('token_scope');
  });

  it('stop at once when revoked, by their own account only', async () => {
    const { id, secret } = await newToken(['usage']);
    expect((await call('POST', `/api-tokens/${id}/revoke`, { cookie: otherCookie }, {})).code).toBe(
      'token_not_found',
    );
    expect((await call('GET', '/usage/breakdown', { token: secret })).status).toBe(200);
    const revoked = await call('POST', `/api-tokens/${id}/revoke`, { cookie }, {});
    expect(revoked.status).toBe(200);
    expect((revoked.json.token as { revoked_at: string | null }).revoked_at).not.toBeNull();
    const r = await call('GET', '/usage/breakdown', { token: secret });
    expect([r.status, r.code]).toEqual([401, 'token_invalid']);
    expect((await call('GET', '/usage/breakdown', { token: `krt_${'x'.repeat(43)}` })).code).toBe(
      'token_invalid',
    );
  });

  it('refuses a token without a name or scopes, or with an unknown scope', async () => {
    for (const body of [
      { name: '', scopes: ['usage'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['write'] },
    ])
      expect((await call('POST', '/api-tokens', { cookie }, body)).code).toBe('invalid_request');
  });
});

describe('API tokens in the console (Chromium)', () => {
  it('makes a token shown once, which reads until it is revoked there', async () => {
    await ensureConsoleBuilt();
    const browser = await launchBrowser();
    try {
      const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
      const r = await page.request.post(`${h.url}/api/console/login`, {
        data: { email: 'tokens@example.com', password: 'correct horse battery' },
        headers: { origin: h.url },
      });
      expect(r.status()).toBe(200);
      await page.goto(`${h.url}/settings`);
      await page.getByRole('heading', { name: 'API tokens' }).waitFor();
      await page.locator('#token-name').fill('weekly report');
      await page.getByLabel('Requests', { exact: true }).check();
      await page.getByRole('button', { name: 'Create token' }).click();
      const secret = (await page.getByLabel('Your new API token').innerText()).trim();
      expect(secret).toMatch(API_TOKEN_PATTERN);
      expect((await call('GET', '/requests?limit=1', { token: secret })).status).toBe(200);
      mkdirSync('/tmp/ins/shots', { recursive: true });
      for (const f of await screenshotBothWidths(page, 'settings-api-tokens'))
        copyFileSync(f, `/tmp/ins/shots/${basename(f)}`);
      await page.getByRole('button', { name: 'Revoke weekly report' }).click();
      // This token's row: the account's tokens revoked by the tests above say "Revoked" already.
      await page
        .getByRole('table', { name: 'API tokens' })
        .getByRole('row')
        .filter({ hasText: 'weekly report' })
        .getByText('Revoked')
        .waitFor();
      expect((await call('GET', '/requests?limit=1', { token: secret })).code).toBe('token_invalid');
    } finally {
      await browser.close();
    }
  }, 60_000);
});

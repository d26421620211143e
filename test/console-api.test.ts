import { afterEach, describe, expect, it } from 'vitest';
import { createAccount } from '../src/accounts/create-account.js';
import type { KeyEvent } from '../src/keys/events.js';
import { hashKey, KEY_PATTERN } from '../src/keys/format.js';
import { makeLogRow, toSummary } from './helpers/log-rows.js';
import { sessionCookieOf, startConsole, type Client, type ConsoleApp } from './console-harness.js';

const PASSWORD = 'correct horse battery';
const HOUR = 3_600_000;
let apps: ConsoleApp[] = [];

async function start(opts: Parameters<typeof startConsole>[0] = {}): Promise<ConsoleApp> {
  const app = await startConsole(opts);
  apps.push(app);
  return app;
}

afterEach(async () => {
  await Promise.all(apps.map((a) => a.close()));
  apps = [];
});

const KEY_VIEW_FIELDS = [
  'account_id',
  'org_id',
  'service',
  'created_at',
  'expires_at',
  'hint',
  'id',
  'last_used_at',
  'name',
  'revoked_at',
  'status',
  // Key limits (test/console-limits.test.ts).
  'allowed_providers',
  'allowed_models',
  'rate_limit_rpm',
  'budget_usd',
  'budget_period',
  'budget_mode',
  'rate_limit_tpm',
  'max_concurrent',
  'rate_limit_scope',
  'budget_unpriced',
  'user_rate_limit_rpm',
  'user_budget_usd',
  'user_budget_period',
  'user_budget_mode',
].sort();

describe('info', () => {
  it('gives the signup mode, the public URL and each SDK’s base URL without a session', async () => {
    const s = await start({ config: { publicUrl: 'https://relay.example.com', signup: 'invite' } });
    const r = await s.client().get('/info');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      signup: 'invite',
      password: { min_length: 10, max_length: 256 },
      fresh_install: true,
      public_url: 'https://relay.example.com',
      providers: {
        openai: { base_url: 'https://relay.example.com/api/proxy/openai/v1' },
        anthropic: { base_url: 'https://relay.example.com/api/proxy/anthropic' },
      },
      upstreams: [],
    });
  });

  it('says the password rule the server enforces, and whether this is a fresh install', async () => {
    const s = await start();
    const c = s.client();
    expect((await c.get('/info')).json).toMatchObject({ fresh_install: true });
    const short = await c.post('/signup', { email: 'a@example.com', password: 'x'.repeat(9) });
    expect(short.status).toBe(400);
    expect(short.json.error.message).toContain(
      `${(await c.get('/info')).json.password.min_length} characters`,
    );
    await c.signup('a@example.com', 'x'.repeat(10));
    expect((await s.client().get('/info')).json).toMatchObject({ fresh_install: false });
  });
});

describe('signup', () => {
  it('creates the account; its first sign-in gets the default key in full, once', async () => {
    const s = await start();
    const c = s.client();
    const signed = await c.post('/signup', { email: ' New@Example.com ', password: PASSWORD });
    expect([signed.status, signed.json]).toEqual([202, { next: 'login' }]);
    expect(sessionCookieOf(signed.headers)).toBeUndefined();
    const r = await c.post('/login', { email: 'new@example.com', password: PASSWORD });
    expect(r.status).toBe(200);
    expect(r.json.account).toEqual({
      id: expect.any(String),
      email: 'new@example.com',
      created_at: expect.any(String),
    });
    expect(r.json.notices).toEqual([]);
    const key = r.json.key;
    expect(Object.keys(key).sort()).toEqual([...KEY_VIEW_FIELDS, 'key'].sort());
    expect(key).toMatchObject({ name: 'default', status: 'active', account_id: r.json.account.id });
    expect(key.key).toMatch(KEY_PATTERN);
    expect((await s.configStore.getKeyByHash(hashKey(key.key)))?.id).toBe(key.id);
    expect((await c.get('/me')).json).toEqual({ account: r.json.account });
    const listed = (await c.get('/keys')).json.keys;
    expect(listed).toHaveLength(1);
    expect(Object.keys(listed[0]).sort()).toEqual(KEY_VIEW_FIELDS);
    expect(JSON.stringify(listed)).not.toContain(key.key);
    const again = await s.client().post('/login', { email: 'new@example.com', password: PASSWORD });
    expect(again.json.key).toBeNull();
    expect((await c.get('/keys')).json.keys).toHaveLength(1);
  });

  it('holds sign-up to one rule: ten spaces, padding and an over-long passphrase are refused alike', async () => {
    const s = await start();
    for (const password of [' '.repeat(10), `  ${'x'.repeat(9)}   `, 'x'.repeat(257)]) {
      const r = await s.client().post('/signup', { email: 'spaces@example.com', password });
      expect([password.length, r.status, r.json.error.code]).toEqual([password.length, 400, 'weak_password']);
    }
  });

  it('refuses a bad email and a short password', async () => {
    const s = await start();
    const c = s.client();
    expect((await c.post('/signup', { email: 'not-an-email', password: PASSWORD })).json.error.code).toBe(
      'invalid_email',
    );
    const weak = await c.post('/signup', { email: 'a@example.com', password: 'short' });
    expect([weak.status, weak.json.error.code]).toEqual([400, 'weak_password']);
    await c.signup('a@example.com');
    // A taken address gets the same answer as a new one (test/signup-enumeration.test.ts).
    const taken = await s.client().post('/signup', { email: 'A@example.com', password: PASSWORD });
    expect([taken.status, taken.json]).toEqual([202, { next: 'login' }]);
    const missing = await s.client().post('/signup', { email: 'b@example.com' });
    expect([missing.status, missing.json.error.code]).toEqual([400, 'invalid_request']);
  });

  it('is refused with 403 signup_closed when sign-up is closed', async () => {
    const s = await start({ config: { signup: 'closed' } });
    const r = await s.client().post('/signup', { email: 'a@example.com', password: PASSWORD });
    expect(r.status).toBe(403);
    expect(r.json).toEqual({ error: { code: 'signup_closed', message: 'Sign-up is closed.' } });
  });

  it('in invite mode lets only the very first account sign up', async () => {
    const s = await start({ config: { signup: 'invite' } });
    const weak = await s.client().post('/signup', { email: 'admin@example.com', password: 'short' });
    expect(weak.json.error.code).toBe('weak_password');
    expect(
      (await s.client().post('/signup', { email: 'admin@example.com', password: PASSWORD })).status,
    ).toBe(202);
    const second = await s.client().post('/signup', { email: 'second@example.com', password: PASSWORD });
    expect([second.status, second.json.error.code]).toEqual([403, 'signup_closed']);
  });

  it('in invite mode is closed once any account exists, also one made by the CLI', async () => {
    const s = await start({ config: { signup: 'invite' } });
    await createAccount(
      { store: s.configStore, bus: s.bus },
      { email: 'ops@example.com', password: PASSWORD },
    );
    const r = await s.client().post('/signup', { email: 'first-web@example.com', password: PASSWORD });
    expect([r.status, r.json.error.code]).toEqual([403, 'signup_closed']);
  });
});

describe('login, me, logout, password', () => {
  it('logs in with any email casing and answers me with the account', async () => {
    const s = await start();
    const account = (await s.client().signup('a@example.com')).json.account;
    const c = s.client();
    expect((await c.get('/me')).status).toBe(401);
    const r = await c.post('/login', { email: 'A@EXAMPLE.com', password: PASSWORD });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ account, key: null, notices: [] });
    expect((await c.get('/me')).json.account).toEqual(account);
    expect((await c.post('/logout', {})).status).toBe(204);
    expect((await c.get('/me')).status).toBe(401);
  });

  it('refuses a weak new password and a wrong current one without changing anything', async () => {
    const s = await start();
    const c = s.client();
    await c.signup('a@example.com');
    const same = await c.post('/password', { current_password: PASSWORD, new_password: PASSWORD });
    expect([same.status, same.json.error]).toEqual([
      400,
      { code: 'weak_password', message: 'The new password is the same as the current one; choose another.' },
    ]);
    const weak = await c.post('/password', { current_password: PASSWORD, new_password: 'short' });
    expect([weak.status, weak.json.error.code]).toEqual([400, 'weak_password']);
    const wrong = await c.post('/password', {
      current_password: 'not my password',
      new_password: 'long enough pass',
    });
    expect([wrong.status, wrong.json.error.code]).toEqual([400, 'wrong_password']);
    expect((await c.get('/me')).status).toBe(200);
    expect((await s.client().post('/login', { email: 'a@example.com', password: PASSWORD })).status).toBe(
      200,
    );
  });
});

describe('settings', () => {
  it("keeps bodies as long as the rows until the account sets fewer days; only the caller's account", async () => {
    const s = await start();
    const c = s.client();
    await c.signup('a@example.com');
    const other = s.client();
    await other.signup('b@example.com');
    expect((await c.get('/settings')).json).toEqual({ settings: { body_retention_days: null } });
    const set = await c.put('/settings', { body_retention_days: 7 });
    expect([set.status, set.json]).toEqual([200, { settings: { body_retention_days: 7 } }]);
    expect((await c.get('/settings')).json.settings).toEqual({ body_retention_days: 7 });
    expect((await other.get('/settings')).json.settings).toEqual({ body_retention_days: null });
    // 0, like null, means as long as the rows.
    expect((await c.put('/settings', { body_retention_days: 0 })).json.settings).toEqual({
      body_retention_days: null,
    });
    for (const body of [
      { body_retention_days: -1 },
      { body_retention_days: 1.5 },
      { body_retention_days: 3651 },
      { body_retention_days: '7' },
      {},
      { body_retention_days: 7, other: 1 },
    ]) {
      const r = await c.put('/settings', body);
      expect([r.status, r.json.error.code], JSON.stringify(body)).toEqual([400, 'invalid_request']);
    }
    expect((await c.get('/settings')).json.settings).toEqual({ body_retention_days: null });
    expect((await s.client().get('/settings')).status).toBe(401);
  });
});

describe('keys', () => {
  async function signedIn(): Promise<{ s: ConsoleApp; c: Client; events: KeyEvent[] }> {
    const s = await start();
    const events: KeyEvent[] = [];
    s.bus.subscribe((e) => events.push(e));
    const c = s.client();
    await c.signup('a@example.com');
    return { s, c, events };
  }

  it('lists each budget’s spend so far in its UTC period and when the period resets', async () => {
    const { s, c } = await signedIn();
    const { account } = (await c.get('/me')).json;
    const capped = (
      await c.post('/keys', { name: 'capped', budget_usd: 0.01, budget_period: 'day', budget_mode: 'hard' })
    ).json.key;
    const now = Date.now();
    const midnight = new Date(now).setUTCHours(24, 0, 0, 0);
    await s.logStore.insertBatch([
      makeLogRow({ account_id: account.id, key_id: capped.id, at: now - 1_000, cost_usd: 0.005 }),
      makeLogRow({ account_id: account.id, key_id: capped.id, at: now - 2_000, cost_usd: 0.0028 }),
    ]);
    const r = await c.get('/keys');
    expect(Object.keys(r.json.budgets)).toEqual([capped.id]); // the default key has no budget
    expect(r.json.budgets[capped.id]).toEqual({
      spent_usd: expect.closeTo(0.0078, 9),
      budget_usd: 0.01,
      period_start: new Date(midnight - 24 * HOUR).toISOString(),
      resets_at: new Date(midnight).toISOString(),
    });
    await c.post(`/keys/${capped.id}/revoke`);
    expect((await c.get('/keys')).json.budgets).toEqual({});
  });

  it('creates a named key, with the full key only in the creation response, listed newest first', async () => {
    const { c } = await signedIn();
    const expires = new Date(Date.now() + 7 * 24 * HOUR).toISOString();
    const r = await c.post('/keys', { name: '  ci runner ', expires_at: expires });
    expect(r.status).toBe(201);
    expect(r.json.key).toMatchObject({
      name: 'ci runner',
      status: 'active',
      expires_at: expires,
      revoked_at: null,
    });
    expect(r.json.key.key).toMatch(KEY_PATTERN);
    expect(r.json.key.hint).toBe(`${r.json.key.key.slice(0, 7)}…${r.json.key.key.slice(-4)}`);
    const keys = (await c.get('/keys')).json.keys;
    expect(keys.map((k: { name: string }) => k.name)).toEqual(['ci runner', 'default']);
    expect(keys.every((k: object) => !('key' in k))).toBe(true);
  });

  it('refuses an empty name, an expiry in the past and a missing body', async () => {
    const { c } = await signedIn();
    expect((await c.post('/keys', { name: '   ' })).json.error.code).toBe('invalid_name');
    const past = await c.post('/keys', { name: 'x', expires_at: '2020-01-01T00:00:00Z' });
    expect([past.status, past.json.error.code]).toEqual([400, 'invalid_expiry']);
    expect((await c.post('/keys', { name: 'x', expires_at: 'tomorrow' })).json.error.code).toBe(
      'invalid_request',
    );
    expect((await c.post('/keys', '')).status).toBe(400);
  });

  it('renames a key', async () => {
    const { c } = await signedIn();
    const id = (await c.get('/keys')).json.keys[0].id;
    const r = await c.patch(`/keys/${id}`, { name: 'laptop' });
    expect(r.status).toBe(200);
    expect(r.json.key).toMatchObject({ id, name: 'laptop', status: 'active' });
    expect(r.json.key.key).toBeUndefined();
  });

  it('rolls a key: a new full key now, the old one expiring after the grace period', async () => {
    const { s, c, events } = await signedIn();
    const old = (await c.get('/keys')).json.keys[0];
    const r = await c.post(`/keys/${old.id}/roll`, { grace_seconds: 3600 });
    expect(r.status).toBe(201);
    expect(r.json.key).toMatchObject({ name: 'default', status: 'active' });
    expect(r.json.key.key).toMatch(KEY_PATTERN);
    expect(r.json.old).toMatchObject({ id: old.id, status: 'active' });
    expect(r.json.old.key).toBeUndefined();
    const grace = Date.parse(r.json.old.expires_at) - Date.now();
    expect(grace).toBeGreaterThan(3500 * 1000);
    expect(grace).toBeLessThanOrEqual(3600 * 1000);
    expect(events).toContainEqual({ type: 'key_changed', key_id: old.id });
    s.advance(3601 * 1000);
    const after = (await c.get('/keys')).json.keys;
    expect(after.find((k: { id: string }) => k.id === old.id).status).toBe('expired');
    expect(after.find((k: { id: string }) => k.id === r.json.key.id).status).toBe('active');
    const again = await c.post(`/keys/${old.id}/roll`, { grace_seconds: 0 });
    expect([again.status, again.json.error.code]).toEqual([409, 'key_not_active']);
  });

  it('refuses a grace period outside 0–86400 seconds', async () => {
    const { c } = await signedIn();
    const id = (await c.get('/keys')).json.keys[0].id;
    for (const grace_seconds of [-1, 86401, 1.5]) {
      expect((await c.post(`/keys/${id}/roll`, { grace_seconds })).json.error.code).toBe('invalid_grace');
    }
    expect((await c.post(`/keys/${id}/roll`, { grace_seconds: '60' })).json.error.code).toBe(
      'invalid_request',
    );
    expect((await c.post(`/keys/${id}/roll`, {})).json.error.code).toBe('invalid_request');
    expect((await c.post(`/keys/${id}/roll`, { grace_seconds: 86400 })).status).toBe(201);
  });

  it('revokes a key at once and tells the other instances', async () => {
    const { c, events } = await signedIn();
    const id = (await c.get('/keys')).json.keys[0].id;
    const r = await c.post(`/keys/${id}/revoke`, {});
    expect(r.status).toBe(200);
    expect(r.json.key).toMatchObject({ id, status: 'revoked', revoked_at: expect.any(String) });
    expect(events).toContainEqual({ type: 'key_changed', key_id: id });
    expect((await c.post(`/keys/${id}/roll`, { grace_seconds: 0 })).status).toBe(409);
  });
});

describe('request log', () => {
  async function withRows() {
    const s = await start();
    const c = s.client();
    const { account, key } = (await c.signup('a@example.com')).json;
    const other = (await c.post('/keys', { name: 'other' })).json.key;
    const now = Date.now();
    const rows = [
      makeLogRow({ account_id: account.id, key_id: key.id, at: now - 5 * 60_000 }),
      makeLogRow({
        account_id: account.id,
        key_id: key.id,
        at: now - 4 * 60_000,
        provider: 'anthropic',
        model: 'claude-sonnet-4-6',
        path: '/v1/messages',
      }),
      makeLogRow({
        account_id: account.id,
        key_id: other.id,
        at: now - 3 * 60_000,
        status: 429,
        outcome: 'upstream_error',
        cost_usd: null,
      }),
      makeLogRow({
        account_id: account.id,
        key_id: key.id,
        at: now - 2 * 60_000,
        properties: { env: 'staging' },
      }),
      makeLogRow({ account_id: account.id, key_id: key.id, at: now - 3 * 24 * HOUR }),
    ];
    await s.logStore.insertBatch(rows);
    return { s, c, rows, key, other };
  }
  const ids = (items: { id: string }[]) => items.map((i) => i.id);

  it('lists the account’s rows newest first without headers or bodies', async () => {
    const { c, rows } = await withRows();
    const r = await c.get('/requests');
    expect(r.status).toBe(200);
    expect(ids(r.json.items)).toEqual([rows[3]!.id, rows[2]!.id, rows[1]!.id, rows[0]!.id, rows[4]!.id]);
    expect(r.json.items[0]).toEqual(toSummary(rows[3]!));
    expect(r.json.next_cursor).toBeNull();
  });

  it('filters by key, provider, model, status, outcome, property and time', async () => {
    const { c, rows, other } = await withRows();
    expect(ids((await c.get(`/requests?key_id=${other.id}`)).json.items)).toEqual([rows[2]!.id]);
    expect(ids((await c.get('/requests?provider=anthropic')).json.items)).toEqual([rows[1]!.id]);
    expect(ids((await c.get('/requests?model=claude-sonnet-4-6')).json.items)).toEqual([rows[1]!.id]);
    expect(ids((await c.get('/requests?status=429')).json.items)).toEqual([rows[2]!.id]);
    expect(ids((await c.get('/requests?outcome=upstream_error')).json.items)).toEqual([rows[2]!.id]);
    expect(ids((await c.get('/requests?property=env:staging')).json.items)).toEqual([rows[3]!.id]);
    const from = encodeURIComponent(new Date(Date.now() - HOUR).toISOString());
    expect((await c.get(`/requests?from=${from}`)).json.items).toHaveLength(4);
    const to = encodeURIComponent(new Date(Date.now() - HOUR).toISOString());
    expect(ids((await c.get(`/requests?to=${to}`)).json.items)).toEqual([rows[4]!.id]);
  });

  it('matches a model by any part of its name, and "quoted" exactly, on the log and on usage', async () => {
    const { c, rows } = await withRows();
    expect(ids((await c.get('/requests?model=claude')).json.items)).toEqual([rows[1]!.id]);
    expect(ids((await c.get('/requests?model=SONNET')).json.items)).toEqual([rows[1]!.id]);
    expect(ids((await c.get(`/requests?model=${encodeURIComponent('"claude"')}`)).json.items)).toEqual([]);
    const exact = encodeURIComponent('"claude-sonnet-4-6"');
    expect(ids((await c.get(`/requests?model=${exact}`)).json.items)).toEqual([rows[1]!.id]);
    const usage = (await c.get('/usage/breakdown?by=model&model=claude')).json.rows;
    expect(usage).toEqual([expect.objectContaining({ group: 'claude-sonnet-4-6', requests: 1 })]);
  });

  it('filters by a property name alone, and compares names as headers are, in any case', async () => {
    const { c, rows } = await withRows();
    // Every row but one carries team.name (the rows' default properties); the staging row has env only.
    const tagged = ids((await c.get('/requests?property=team.name')).json.items);
    expect(tagged).toHaveLength(4);
    expect(tagged).not.toContain(rows[3]!.id);
    expect(ids((await c.get('/requests?property=TEAM.Name')).json.items)).toEqual(tagged);
    expect(ids((await c.get('/requests?property=ENV:staging')).json.items)).toEqual([rows[3]!.id]);
    expect(ids((await c.get('/requests?property=team')).json.items)).toEqual([]);
  });

  it('says what is wrong with a filter in words, never naming a query parameter', async () => {
    const { c } = await withRows();
    const long = await c.get(`/requests?q=${'a'.repeat(201)}`);
    expect([long.status, long.json.error.message]).toEqual([
      400,
      'Search looks for up to 200 characters; shorten it.',
    ]);
    const prop = await c.get('/requests?property=:x');
    expect(prop.json.error.message).toBe(
      'Give the property name first: name or name:value, e.g. team:search.',
    );
  });

  it('finds either side of OR in a search, and takes an operator alone as a word', async () => {
    const { c, rows } = await withRows();
    expect(ids((await c.get('/requests?q=sonnet')).json.items)).toEqual([rows[1]!.id]);
    expect(ids((await c.get('/requests?q=sonnet%20OR%20nothinglikeit')).json.items)).toEqual([rows[1]!.id]);
    expect(ids((await c.get('/requests?q=sonnet%20AND%20messages')).json.items)).toEqual([rows[1]!.id]);
    expect((await c.get('/requests?q=OR')).status).toBe(200);
  });

  it('pages with limit and cursor', async () => {
    const { c, rows } = await withRows();
    const first = (await c.get('/requests?limit=2')).json;
    expect(ids(first.items)).toEqual([rows[3]!.id, rows[2]!.id]);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = (await c.get(`/requests?limit=2&cursor=${encodeURIComponent(first.next_cursor)}`)).json;
    expect(ids(second.items)).toEqual([rows[1]!.id, rows[0]!.id]);
  });

  it('refuses malformed filters with 400 invalid_request', async () => {
    const { c } = await withRows();
    for (const q of [
      'limit=0',
      'limit=201',
      'limit=abc',
      'status=abc',
      'provider=google',
      'outcome=meh',
      'from=yesterday',
      'property=:staging',
    ]) {
      const r = await c.get(`/requests?${q}`);
      expect([q, r.status, r.json.error.code]).toEqual([q, 400, 'invalid_request']);
    }
  });

  it('opens one request in full', async () => {
    const { c, rows } = await withRows();
    const r = await c.get(`/requests/${rows[1]!.id}`);
    expect(r.status).toBe(200);
    // The fixture's cost is not the library's figure for its counts: no parts are shown for it.
    expect(r.json).toEqual({ request: rows[1], cost_breakdown: null });
    expect((await c.get('/requests/01NOSUCHROW')).json.error.code).toBe('request_not_found');
  });

  it('charts usage over the last 24 hours by default', async () => {
    const { c } = await withRows();
    const r = await c.get('/usage/series?bucket=hour');
    expect(r.status).toBe(200);
    const points: { requests: number; errors: number; unknown_cost_requests: number }[] = r.json.points;
    expect(points.reduce((n, p) => n + p.requests, 0)).toBe(4);
    expect(points.reduce((n, p) => n + p.errors, 0)).toBe(1);
    expect(points.reduce((n, p) => n + p.unknown_cost_requests, 0)).toBe(1);
    const week = encodeURIComponent(new Date(Date.now() - 7 * 24 * HOUR).toISOString());
    const all = (await c.get(`/usage/series?bucket=day&from=${week}`)).json.points;
    expect(all.reduce((n: number, p: { requests: number }) => n + p.requests, 0)).toBe(5);
  });

  it('breaks usage down by model, key or provider', async () => {
    const { c, key, other } = await withRows();
    const byModel = (await c.get('/usage/breakdown')).json.rows;
    expect(
      Object.fromEntries(byModel.map((r: { group: string; requests: number }) => [r.group, r.requests])),
    ).toEqual({
      'gpt-4o-mini': 3,
      'claude-sonnet-4-6': 1,
    });
    const byKey = (await c.get('/usage/breakdown?by=key_id')).json.rows;
    expect(
      Object.fromEntries(byKey.map((r: { group: string; requests: number }) => [r.group, r.requests])),
    ).toEqual({
      [key.id]: 3,
      [other.id]: 1,
    });
    const anthropic = (await c.get('/usage/breakdown?by=provider&provider=anthropic')).json.rows;
    expect(anthropic).toHaveLength(1);
    expect(anthropic[0]).toMatchObject({ group: 'anthropic', requests: 1 });
  });

  it('lists the account’s batches, results not yet fetched as null cost, never another account’s', async () => {
    const { s, c, key } = await withRows();
    const seen = {
      provider: 'anthropic' as const,
      key_id: key.id,
      account_id: key.account_id as string,
      at: new Date().toISOString(),
      created_here: true,
      status: 'ended',
      request_counts: { succeeded: 2, errored: 1 },
      output_file_id: null,
    };
    await s.logStore.upsertBatch({ ...seen, batch_id: 'msgbatch_a' });
    await s.logStore.upsertBatch({ ...seen, batch_id: 'msgbatch_other', account_id: 'acct-someone-else' });
    const r = await c.get('/batches');
    expect(r.status).toBe(200);
    expect(r.json.batches).toHaveLength(1);
    expect(r.json.batches[0]).toMatchObject({
      batch_id: 'msgbatch_a',
      status: 'ended',
      request_counts: { succeeded: 2, errored: 1 },
      results_cost_usd: null,
      results_fetched_at: null,
    });
    expect((await c.get('/batches?limit=0')).json.error.code).toBe('invalid_request');
    expect((await s.client().get('/batches')).status).toBe(401);
  });

  it('refuses an inverted range and a range with too many buckets', async () => {
    const { c } = await withRows();
    const from = encodeURIComponent(new Date().toISOString());
    const to = encodeURIComponent(new Date(Date.now() - HOUR).toISOString());
    expect((await c.get(`/usage/series?from=${from}&to=${to}`)).json.error.code).toBe('invalid_range');
    const longAgo = encodeURIComponent('2020-01-01T00:00:00Z');
    expect((await c.get(`/usage/series?bucket=minute&from=${longAgo}`)).json.error.code).toBe(
      'range_too_large',
    );
    expect((await c.get('/usage/breakdown?by=nonsense')).json.error.code).toBe('invalid_request');
  });
});

describe('routing', () => {
  it('answers unknown console paths and methods with a JSON 404', async () => {
    const s = await start();
    const c = s.client();
    for (const r of [await c.get('/nope'), await c.call('DELETE', '/keys', {}), await c.get('/')]) {
      expect(r.status).toBe(404);
      expect(r.json).toEqual({ error: { code: 'not_found', message: 'No such endpoint.' } });
    }
  });
});

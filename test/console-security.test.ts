import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisLoginThrottle } from '../src/accounts/redis-throttle.js';
import { MemoryLoginThrottle } from '../src/accounts/throttle.js';
import Fastify from 'fastify';
import { CONTENT_SECURITY_POLICY, securityHeaders } from '../src/console-api/index.js';
import { makeLogRow } from './helpers/log-rows.js';
import { sessionCookieOf, startConsole, type ConsoleApp } from './console-harness.js';

const PASSWORD = 'correct horse battery';
const MIN = 60_000;
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

describe('login throttling', () => {
  const limits = { windowMs: 15 * MIN, maxPerEmail: 3, maxPerIp: 5 };

  it('answers 429 too_many_attempts with retry-after once one account has too many failures, from any IP', async () => {
    const s = await start({ trustProxy: true, throttle: new MemoryLoginThrottle(limits) });
    await s.client().signup('victim@example.com');
    const c = s.client();
    for (let i = 0; i < 3; i++) {
      const r = await c.post(
        '/login',
        { email: 'victim@example.com', password: 'wrong password!' },
        { 'x-forwarded-for': `10.0.0.${i}` },
      );
      expect(r.status).toBe(401);
    }
    // Even the right password, from a fresh IP, waits: the window is per account.
    const r = await c.post(
      '/login',
      { email: 'Victim@Example.com', password: PASSWORD },
      { 'x-forwarded-for': '10.0.1.1' },
    );
    expect(r.status).toBe(429);
    expect(r.json.error.code).toBe('too_many_attempts');
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(900);
    expect(sessionCookieOf(r.headers)).toBeUndefined();
    // Other accounts from the same IP are unaffected.
    const other = await c.post(
      '/login',
      { email: 'someone@example.com', password: 'x' },
      { 'x-forwarded-for': '10.0.1.1' },
    );
    expect(other.status).toBe(401);
  });

  it('answers 429 once one IP has too many failures, whatever the email, while other IPs still log in', async () => {
    const s = await start({ trustProxy: true, throttle: new MemoryLoginThrottle(limits) });
    await s.client().signup('user@example.com');
    const c = s.client();
    for (let i = 0; i < 5; i++) {
      const r = await c.post(
        '/login',
        { email: `probe${i}@example.com`, password: 'guess' },
        { 'x-forwarded-for': '10.9.9.9' },
      );
      expect(r.status).toBe(401);
    }
    const blocked = await c.post(
      '/login',
      { email: 'user@example.com', password: PASSWORD },
      { 'x-forwarded-for': '10.9.9.9' },
    );
    expect(blocked.status).toBe(429);
    expect(blocked.headers['retry-after']).toMatch(/^\d+$/);
    const elsewhere = await c.post(
      '/login',
      { email: 'user@example.com', password: PASSWORD },
      { 'x-forwarded-for': '10.8.8.8' },
    );
    expect(elsewhere.status).toBe(200);
  });

  it('counts every sign-up like a login attempt, new address or taken', async () => {
    const s = await start({ trustProxy: true, throttle: new MemoryLoginThrottle(limits) });
    const c = s.client();
    const signup = (email: string, ip = '10.7.7.7') =>
      c.post('/signup', { email, password: PASSWORD }, { 'x-forwarded-for': ip });
    for (let i = 0; i < 3; i++) expect((await signup(`new${i}@example.com`)).status).toBe(202);
    for (let i = 0; i < 2; i++) expect((await signup(`new${i}@example.com`)).status).toBe(202);
    // Five sign-ups from one IP fill its window (maxPerIp 5), whichever addresses exist.
    const probe = await signup('other@example.com');
    expect(probe.status).toBe(429);
    expect(probe.json.error.code).toBe('too_many_attempts');
    expect((await signup('other@example.com', '10.7.7.8')).status).toBe(202);
  });

  it('clears an account’s failures after a successful login', async () => {
    const s = await start({ trustProxy: true, throttle: new MemoryLoginThrottle(limits) });
    // Signed up from elsewhere: a sign-up stays counted against its IP.
    await s
      .client()
      .post('/signup', { email: 'user@example.com', password: PASSWORD }, { 'x-forwarded-for': '10.9.9.9' });
    const c = s.client();
    for (let i = 0; i < 2; i++) await c.post('/login', { email: 'user@example.com', password: 'nope' });
    expect((await c.post('/login', { email: 'user@example.com', password: PASSWORD })).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      expect((await c.post('/login', { email: 'user@example.com', password: 'nope' })).status).toBe(401);
    }
    expect((await c.post('/login', { email: 'user@example.com', password: PASSWORD })).status).toBe(200);
  });

  it('throttles guesses of the current password on password change', async () => {
    const s = await start({ throttle: new MemoryLoginThrottle(limits) });
    const c = s.client();
    await c.signup('user@example.com');
    for (let i = 0; i < 3; i++) {
      const r = await c.post('/password', {
        current_password: 'guess guess',
        new_password: 'new password 123',
      });
      expect(r.json.error.code).toBe('wrong_password');
    }
    const r = await c.post('/password', { current_password: PASSWORD, new_password: 'new password 123' });
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBeDefined();
  });

  describe('shared through Redis', () => {
    const prefix = `kr-test-${randomBytes(6).toString('hex')}:`;
    const redis = new Redis('redis://127.0.0.1:6379');
    const other = new Redis('redis://127.0.0.1:6379');
    afterAll(async () => {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
      other.disconnect();
    });

    it('counts failures made on one instance against logins on another', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'kr-console-shared-'));
      try {
        const one = await start({ dir, throttle: new RedisLoginThrottle(redis, { prefix, limits }) });
        const two = await start({ dir, throttle: new RedisLoginThrottle(other, { prefix, limits }) });
        await one.client().signup('shared@example.com');
        for (let i = 0; i < 3; i++) {
          const app = i % 2 ? one : two;
          expect(
            (await app.client().post('/login', { email: 'shared@example.com', password: 'bad' })).status,
          ).toBe(401);
        }
        const r = await one.client().post('/login', { email: 'shared@example.com', password: PASSWORD });
        expect(r.status).toBe(429);
        expect(
          (await two.client().post('/login', { email: 'shared@example.com', password: PASSWORD })).status,
        ).toBe(429);
      } finally {
        await Promise.all(apps.map((a) => a.close()));
        apps = [];
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});

describe('account enumeration', () => {
  it('answers an unknown email exactly like a wrong password', async () => {
    const s = await start();
    await s.client().signup('known@example.com');
    const unknown = await s
      .client()
      .post('/login', { email: 'unknown@example.com', password: 'some password' });
    const wrong = await s.client().post('/login', { email: 'known@example.com', password: 'some password' });
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect(unknown.text).toBe(wrong.text);
    expect(JSON.parse(wrong.text)).toEqual({
      error: { code: 'invalid_credentials', message: 'Email or password is incorrect.' },
    });
    const { date: _a, ...h1 } = unknown.headers;
    const { date: _b, ...h2 } = wrong.headers;
    expect(h1).toEqual(h2);
  });
});

describe('session cookie', () => {
  it('is HttpOnly, SameSite=Lax, Path=/ and not Secure over plain http', async () => {
    const s = await start();
    const r = await s.client().signup('a@example.com');
    const cookie = sessionCookieOf(r.headers)!;
    expect(cookie).toMatch(/^kr_session=[A-Za-z0-9_-]{43}; /);
    const attrs = cookie.split('; ').slice(1);
    expect(attrs).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Lax', 'Path=/']));
    expect(attrs).not.toContain('Secure');
  });

  it('is Secure when the public URL is https', async () => {
    const s = await start({ config: { publicUrl: 'https://relay.example.com', secureCookies: true } });
    const c = s.client();
    const signup = await c.signup('a@example.com');
    expect(sessionCookieOf(signup.headers)!.split('; ')).toContain('Secure');
    const login = await c.post('/login', { email: 'a@example.com', password: PASSWORD });
    expect(sessionCookieOf(login.headers)!.split('; ')).toContain('Secure');
    const logout = await c.post('/logout', {});
    expect(sessionCookieOf(logout.headers)!.split('; ')).toEqual(
      expect.arrayContaining(['Secure', 'Max-Age=0']),
    );
  });

  it('gets a new session id at login, and the one the browser had stops working', async () => {
    const s = await start();
    const c = s.client();
    await c.signup('a@example.com');
    const before = c.cookie!;
    expect((await c.post('/login', { email: 'a@example.com', password: PASSWORD })).status).toBe(200);
    expect(c.cookie).not.toBe(before);
    expect((await c.get('/me')).status).toBe(200);
    expect((await c.get('/me', { cookie: `kr_session=${before}` })).status).toBe(401);
  });
});

describe('session invalidation and expiry', () => {
  it('ends the session at logout', async () => {
    const s = await start();
    const c = s.client();
    await c.signup('a@example.com');
    const token = c.cookie!;
    const out = await c.post('/logout', {});
    expect(out.status).toBe(204);
    expect(sessionCookieOf(out.headers)).toMatch(/^kr_session=; .*Max-Age=0/);
    const r = await c.get('/me', { cookie: `kr_session=${token}` });
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe('not_authenticated');
  });

  it('ends every session of the account at a password change and gives the changing client a fresh one', async () => {
    const s = await start();
    const first = s.client();
    await first.signup('a@example.com');
    const second = s.client();
    await second.post('/login', { email: 'a@example.com', password: PASSWORD });
    const oldToken = first.cookie!;
    const r = await first.post('/password', {
      current_password: PASSWORD,
      new_password: 'a brand new password',
    });
    expect(r.status).toBe(204);
    expect(first.cookie).toBeDefined();
    expect(first.cookie).not.toBe(oldToken);
    expect((await first.get('/me')).status).toBe(200);
    expect((await first.get('/me', { cookie: `kr_session=${oldToken}` })).status).toBe(401);
    expect((await second.get('/me')).status).toBe(401);
    expect((await s.client().post('/login', { email: 'a@example.com', password: PASSWORD })).status).toBe(
      401,
    );
    expect(
      (await s.client().post('/login', { email: 'a@example.com', password: 'a brand new password' })).status,
    ).toBe(200);
  });

  it('expires a session left idle longer than the idle limit, but not one in use', async () => {
    const s = await start({ config: { sessionIdleMs: 30 * MIN, sessionMaxMs: 24 * 60 * MIN } });
    const busy = s.client();
    await busy.signup('a@example.com');
    const idle = s.client();
    await idle.post('/login', { email: 'a@example.com', password: PASSWORD });
    for (let i = 0; i < 4; i++) {
      s.advance(20 * MIN);
      expect((await busy.get('/me')).status).toBe(200);
    }
    const r = await idle.get('/me');
    expect(r.status).toBe(401);
    expect(sessionCookieOf(r.headers)).toMatch(/Max-Age=0/);
  });

  it('ends a session at its absolute lifetime however busy it is', async () => {
    const s = await start({ config: { sessionIdleMs: 60 * MIN, sessionMaxMs: 180 * MIN } });
    const c = s.client();
    const r = await c.signup('a@example.com');
    expect(sessionCookieOf(r.headers)).toContain(`Max-Age=${180 * 60}`);
    for (let i = 0; i < 5; i++) {
      s.advance(35 * MIN);
      expect((await c.get('/me')).status).toBe(200);
    }
    s.advance(5 * MIN);
    expect((await c.get('/me')).status).toBe(401);
  });
});

describe('CSRF', () => {
  async function signedIn() {
    const s = await start({ config: { publicUrl: 'https://relay.example.com' } });
    const c = s.client();
    await c.signup('a@example.com');
    return { s, c };
  }

  it('refuses a state change from a cross-site Origin and changes nothing', async () => {
    const { c } = await signedIn();
    const r = await c.post('/keys', { name: 'evil' }, { origin: 'https://evil.example' });
    expect(r.status).toBe(403);
    expect(r.json).toEqual({ error: { code: 'cross_site', message: 'Cross-site request refused.' } });
    expect((await c.get('/keys')).json.keys).toHaveLength(1);
  });

  it('refuses Sec-Fetch-Site: cross-site and an opaque Origin', async () => {
    const { c } = await signedIn();
    expect((await c.post('/keys', { name: 'x' }, { 'sec-fetch-site': 'cross-site' })).json.error.code).toBe(
      'cross_site',
    );
    expect((await c.post('/keys', { name: 'x' }, { origin: 'null' })).json.error.code).toBe('cross_site');
    expect((await c.post('/logout', {}, { origin: 'http://127.0.0.1.evil.example' })).status).toBe(403);
    expect((await c.get('/me')).status).toBe(200);
  });

  it('refuses a body that is not application/json (what an HTML form can send)', async () => {
    const { c } = await signedIn();
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const r = await c.post('/keys', 'name=x', { 'content-type': type });
      expect(r.status).toBe(415);
      expect(r.json.error.code).toBe('unsupported_media_type');
    }
    expect((await c.get('/keys')).json.keys).toHaveLength(1);
  });

  it('accepts the server’s own origin, the public URL’s origin and same-origin fetch metadata', async () => {
    const { s, c } = await signedIn();
    expect((await c.post('/keys', { name: 'own' }, { origin: s.base })).status).toBe(201);
    expect((await c.post('/keys', { name: 'public' }, { origin: 'https://relay.example.com' })).status).toBe(
      201,
    );
    const r = await c.post(
      '/keys',
      { name: 'meta' },
      { 'sec-fetch-site': 'same-origin', 'content-type': 'application/json; charset=utf-8' },
    );
    expect(r.status).toBe(201);
  });
});

describe('security headers', () => {
  const expected = {
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cache-control': 'no-store',
  };

  it('uses the documented CSP', () => {
    expect(CONTENT_SECURITY_POLICY).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'",
    );
  });

  it('are on successes, errors, refusals and unknown endpoints alike', async () => {
    const s = await start();
    const c = s.client();
    const replies = [
      await c.get('/info'),
      await c.signup('a@example.com'),
      await c.get('/keys'),
      await s.client().get('/keys'),
      await c.get('/no/such/endpoint'),
      await c.post('/keys', { name: 'x' }, { origin: 'https://evil.example' }),
      await c.post('/keys', '{not json'),
    ];
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 401, 404, 403, 400]);
    for (const r of replies) expect(r.headers).toMatchObject(expected);
  });

  it.each(['onRequest', 'onSend'] as const)(
    'exports a hook that, as %s, gives other routes (the static console) the same headers without no-store',
    async (stage) => {
      const app = Fastify();
      app.addHook(stage, securityHeaders);
      app.get('/', () => 'console');
      app.get('/fail', () => {
        throw new Error('boom');
      });
      for (const url of ['/', '/fail', '/missing']) {
        const r = await app.inject({ method: 'GET', url });
        expect(r.headers).toMatchObject({
          'content-security-policy': CONTENT_SECURITY_POLICY,
          'x-content-type-options': 'nosniff',
          'referrer-policy': 'no-referrer',
          'x-frame-options': 'DENY',
        });
        expect(r.headers['cache-control']).toBeUndefined();
        if (url === '/') expect(r.body).toBe('console');
      }
      await app.close();
    },
  );
});

describe('request bodies', () => {
  it('refuses a console body over 64 KiB with 413 payload_too_large', async () => {
    const s = await start();
    const r = await s.client().post('/login', { email: 'a@example.com', password: 'x'.repeat(70_000) });
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe('payload_too_large');
  });
});

describe('isolation between accounts', () => {
  it('answers 404 for another account’s keys, exactly as for ids that do not exist', async () => {
    const s = await start();
    const alice = s.client();
    const aliceKey = (await alice.signup('alice@example.com')).json.key;
    const bob = s.client();
    await bob.signup('bob@example.com');
    const attempts = [
      () => bob.patch(`/keys/${aliceKey.id}`, { name: 'mine now' }),
      () => bob.post(`/keys/${aliceKey.id}/roll`, { grace_seconds: 0 }),
      () => bob.post(`/keys/${aliceKey.id}/revoke`, {}),
    ];
    for (const attempt of attempts) {
      const r = await attempt();
      expect(r.status).toBe(404);
      expect(r.json).toEqual({ error: { code: 'key_not_found', message: 'No such key.' } });
    }
    const missing = await bob.post('/keys/01NOSUCHKEY/revoke', {});
    expect(missing.text).toBe(JSON.stringify({ error: { code: 'key_not_found', message: 'No such key.' } }));
    const keys = (await bob.get('/keys')).json.keys;
    expect(keys.map((k: { id: string }) => k.id)).not.toContain(aliceKey.id);
    const aliceNow = (await alice.get('/keys')).json.keys[0];
    expect(aliceNow).toMatchObject({ id: aliceKey.id, name: 'default', status: 'active', expires_at: null });
  });

  it('answers 404 for another account’s request rows and never lists them', async () => {
    const s = await start();
    const alice = s.client();
    const a = (await alice.signup('alice@example.com')).json;
    const bob = s.client();
    await bob.signup('bob@example.com');
    const row = makeLogRow({ account_id: a.account.id, key_id: a.key.id, at: Date.now() - MIN });
    await s.logStore.insertBatch([row]);
    expect((await alice.get(`/requests/${row.id}`)).status).toBe(200);
    const r = await bob.get(`/requests/${row.id}`);
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('request_not_found');
    expect((await bob.get('/requests')).json.items).toEqual([]);
    expect((await bob.get(`/requests?key_id=${a.key.id}`)).json.items).toEqual([]);
    expect((await bob.get('/usage/breakdown?by=key_id')).json.rows).toEqual([]);
  });
});

describe('errors', () => {
  it('turns an unexpected failure into a bare 500 internal_error without a stack', async () => {
    const s = await start();
    const c = s.client();
    await c.signup('a@example.com');
    await s.configStore.close();
    const r = await c.get('/keys');
    expect(r.status).toBe(500);
    expect(r.text).toBe(JSON.stringify({ error: { code: 'internal_error', message: 'Internal error.' } }));
  });

  it('requires a session for every account route', async () => {
    const s = await start();
    const c = s.client();
    const routes = [
      () => c.get('/me'),
      () => c.get('/keys'),
      () => c.post('/keys', { name: 'x' }),
      () => c.get('/requests'),
      () => c.get('/requests/x'),
      () => c.get('/usage/series'),
      () => c.get('/usage/breakdown'),
      () => c.post('/password', { current_password: 'a', new_password: 'b' }),
    ];
    for (const route of routes) expect((await route()).json.error.code).toBe('not_authenticated');
  });

  it('refuses a forged cookie without touching another session', async () => {
    const s = await start();
    const c = s.client();
    await c.signup('a@example.com');
    const res = await request(`${s.base}/api/console/me`, {
      headers: { cookie: 'kr_session=../../etc; kr_session=x' },
    });
    expect(res.statusCode).toBe(401);
    await res.body.dump();
  });
});

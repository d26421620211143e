/**
 * Single sign-on against a real OpenID Connect provider (oidc-provider on 127.0.0.1): an owner sets up the
 * organization's connection, a person's first sign-in makes them a member, and each attack on the flow is
 * refused: a wrong state, a replayed code, a wrong issuer, an ID token for another audience or with another
 * nonce, a person of another domain, an unverified email, an account outside the organization, and a
 * callback the browser never started. Then the SSO-only policy, an identity provider that is down, and the
 * sign-in throttle on starts.
 */
import * as oidc from 'openid-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_THROTTLE_LIMITS, MemoryLoginThrottle } from '../src/accounts/throttle.js';
import { startConsole, type Client, type ConsoleApp } from './console-harness.js';
import { signInAtIdp, startIdp, type Idp } from './helpers/oidc-idp.js';

const SECRET = 'kr-client-secret-that-must-never-show';
const PASSWORD = 'correct horse battery';

let s: ConsoleApp;
let idp: Idp;
let other: Idp;
let owner: Client;
let acme: string;
let callbackUri: string;

/** The flow cookie the start set, as a browser would keep it. */
function flowCookie(headers: Record<string, string | string[] | undefined>): string {
  const raw = headers['set-cookie'];
  const c = (Array.isArray(raw) ? raw : [raw ?? '']).find((x) => x.startsWith('kr_sso='));
  if (!c) throw new Error('no kr_sso cookie');
  return c.slice('kr_sso='.length).split(';')[0]!;
}

async function start(email: string): Promise<{ url: string; cookie: string }> {
  const r = await s.client().post('/sso/start', { email });
  expect(r.status, r.text).toBe(200);
  return { url: r.json.url as string, cookie: flowCookie(r.headers) };
}

/** Delivers the IdP's redirect to keyrelay's callback, with the given flow cookie. */
async function callback(back: URL, cookie: string | null) {
  const path = `${back.pathname}${back.search}`;
  const res = await request(`${s.base}${path}`, { headers: cookie ? { cookie: `kr_sso=${cookie}` } : {} });
  await res.body.dump();
  const raw = res.headers['set-cookie'];
  const session = (Array.isArray(raw) ? raw : [raw ?? ''])
    .find((c) => c.startsWith('kr_session='))
    ?.slice('kr_session='.length)
    .split(';')[0];
  return { status: res.statusCode, location: String(res.headers.location), session: session || null };
}

/** A whole sign-in: start, the IdP's form, the callback. */
async function ssoSignIn(email: string, login: string, password = PASSWORD) {
  const { url, cookie } = await start(email);
  return callback(await signInAtIdp(url, login, password), cookie);
}

/** A genuine ID token the IdP issues to `clientId` (redirected to keyrelay's callback), with its own nonce. */
async function idTokenFor(from: Idp, clientId: string, secret: string, login: string): Promise<string> {
  const config = await oidc.discovery(new URL(from.issuer), clientId, secret, undefined, {
    execute: [oidc.allowInsecureRequests],
  });
  const verifier = oidc.randomPKCECodeVerifier();
  const nonce = oidc.randomNonce();
  const state = oidc.randomState();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: callbackUri,
    scope: 'openid email',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    nonce,
    state,
  });
  const back = await signInAtIdp(url.href, login, PASSWORD);
  const tokens = await oidc.authorizationCodeGrant(config, back, {
    pkceCodeVerifier: verifier,
    expectedNonce: nonce,
    expectedState: state,
  });
  return tokens.id_token!;
}

const users = {
  alice: { password: PASSWORD, email: 'alice@acme.test' },
  bob: { password: PASSWORD, email: 'bob@acme.test' },
  mallory: { password: PASSWORD, email: 'mallory@evil.test' },
  unverified: { password: PASSWORD, email: 'unverified@acme.test', email_verified: false },
  outside: { password: PASSWORD, email: 'outside@acme.test' },
  member: { password: PASSWORD, email: 'member@acme.test' },
  owner: { password: PASSWORD, email: 'owner@acme.test' },
  carol: { password: PASSWORD, email: 'carol@acme.test' },
};

beforeAll(async () => {
  // Every start here comes from 127.0.0.1, most of them refused by design: past the throttle's window for one
  // address. The throttle on starts has its own test at the end, with its own console.
  s = await startConsole({
    throttle: new MemoryLoginThrottle({ ...DEFAULT_THROTTLE_LIMITS, maxPerIp: 1_000 }),
  });
  s.config.publicUrl = s.base;
  callbackUri = `${s.base}/api/console/sso/callback`;
  const clients = [
    { client_id: 'keyrelay', client_secret: SECRET, redirect_uris: [callbackUri] },
    { client_id: 'another-app', client_secret: 'another secret', redirect_uris: [callbackUri] },
  ];
  idp = await startIdp({ clients, users });
  other = await startIdp({ clients, users });
  owner = s.client();
  await owner.signup('owner@acme.test');
  const created = await owner.post('/orgs', { name: 'Acme' });
  acme = created.json.org.id;
}, 30_000);

afterAll(async () => {
  await idp?.close();
  await other?.close();
  await s?.close();
});

const connection = () => ({
  issuer: idp.issuer,
  client_id: 'keyrelay',
  client_secret: SECRET,
  domains: ['acme.test'],
  default_role: 'member',
  sso_only: false,
});

describe('setting up single sign-on', () => {
  it('is for owners only, never shows the secret, and is audited without it', async () => {
    const admin = s.client();
    await admin.signup('admin@example.com');
    await s.configStore.setMember(
      acme,
      (await s.configStore.getAccountByEmail('admin@example.com'))!.id,
      'admin',
    );
    expect((await admin.put(`/orgs/${acme}/sso`, connection())).status).toBe(403);
    const stranger = s.client();
    await stranger.signup('stranger@example.com');
    expect((await stranger.put(`/orgs/${acme}/sso`, connection())).status).toBe(404);
    expect((await stranger.get(`/orgs/${acme}/sso`)).status).toBe(404);

    const put = await owner.put(`/orgs/${acme}/sso`, connection());
    expect(put.status, put.text).toBe(200);
    expect(put.json.sso).toMatchObject({
      issuer: idp.issuer,
      client_id: 'keyrelay',
      client_secret_set: true,
      domains: ['acme.test'],
      default_role: 'member',
      sso_only: false,
    });
    expect(put.json.redirect_uri).toBe(callbackUri);
    const got = await owner.get(`/orgs/${acme}/sso`);
    expect(got.json.sso.client_id).toBe('keyrelay');
    for (const text of [put.text, got.text]) expect(text).not.toContain(SECRET);

    // A change without the secret keeps the stored one.
    const { client_secret: _omit, ...withoutSecret } = connection();
    expect((await owner.put(`/orgs/${acme}/sso`, withoutSecret)).json.sso.client_secret_set).toBe(true);
    expect((await s.configStore.getSsoConnection(acme))!.client_secret).toBe(SECRET);

    const audit = await owner.get(`/orgs/${acme}/audit?action=settings.sso`);
    expect(audit.json.entries).toHaveLength(2);
    expect(audit.json.entries[1].after).toMatchObject({ issuer: idp.issuer, client_secret_changed: true });
    expect(audit.json.entries[0].after).toMatchObject({ client_secret_changed: false });
    expect(audit.text).not.toContain(SECRET);
  });

  it('refuses unusable settings and a domain another organization has', async () => {
    const bad = async (body: object) => owner.put(`/orgs/${acme}/sso`, { ...connection(), ...body });
    expect((await bad({ issuer: 'http://idp.example.com' })).json.error.code).toBe('invalid_sso');
    expect((await bad({ issuer: 'not a url' })).json.error.code).toBe('invalid_sso');
    expect((await bad({ domains: [] })).json.error.code).toBe('invalid_sso');
    expect((await bad({ domains: ['not a domain'] })).json.error.code).toBe('invalid_sso');
    expect((await bad({ default_role: 'owner' })).status).toBe(400);
    // A personal organization has one member: no single sign-on there.
    const me = (await owner.get('/me')).json.account.id as string;
    expect((await owner.put(`/orgs/${me}/sso`, connection())).json.error.code).toBe('invalid_sso');

    const second = await owner.post('/orgs', { name: 'Other' });
    const taken = await owner.put(`/orgs/${second.json.org.id}/sso`, connection());
    expect(taken.status).toBe(409);
    expect(taken.json.error.code).toBe('sso_domain_taken');
    // The refused change left Acme's connection whole.
    expect((await s.configStore.findSsoConnectionByDomain('acme.test'))!.org_id).toBe(acme);
  });
});

describe('signing in', () => {
  it('makes a first-time person a member with the default role, and signs them in again later', async () => {
    const first = await ssoSignIn('alice@acme.test', 'alice');
    expect(first.status).toBe(303);
    expect(first.location).toBe('/');
    expect(first.session).toBeTruthy();
    const alice = s.client();
    alice.cookie = first.session!;
    const me = await alice.get('/me');
    expect(me.json.account.email).toBe('alice@acme.test');
    const orgs = await alice.get('/orgs');
    expect(orgs.json.orgs.find((o: { id: string }) => o.id === acme)).toMatchObject({ role: 'member' });

    const again = await ssoSignIn('alice@acme.test', 'alice');
    expect(again.session).toBeTruthy();
    expect(again.session).not.toBe(first.session);
    const members = await owner.get(`/orgs/${acme}/members`);
    expect(members.json.members.filter((m: { email: string }) => m.email === 'alice@acme.test')).toHaveLength(
      1,
    );

    const audit = await owner.get(`/orgs/${acme}/audit?actor=alice@acme.test`);
    const actions = audit.json.entries.map((e: { action: string }) => e.action);
    expect(actions.filter((a: string) => a === 'member.join')).toHaveLength(1);
    expect(actions.filter((a: string) => a === 'sign_in')).toHaveLength(2);
    expect(audit.json.entries[0].after).toMatchObject({ via: 'sso', sso_org: acme });
  });

  it('starts the code flow with PKCE (S256), state, nonce and a flow cookie only this site reads', async () => {
    const r = await s.client().post('/sso/start', { email: 'Alice@Acme.test' });
    const url = new URL(r.json.url as string);
    expect(url.origin).toBe(idp.issuer);
    const q = url.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe('keyrelay');
    expect(q.get('redirect_uri')).toBe(callbackUri);
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('login_hint')).toBe('alice@acme.test');
    expect(url.href).not.toContain(SECRET);
    const cookie = ([r.headers['set-cookie']].flat() as string[]).find((c) => c.startsWith('kr_sso='))!;
    expect(cookie).toMatch(/; Path=\/api\/console\/sso; Max-Age=600; HttpOnly; SameSite=Lax$/);
    // The verifier stays on the server: the cookie is a random handle, not the flow.
    expect(cookie).not.toContain(q.get('state')!);
  });

  it('answers 404 for a domain no organization signs in', async () => {
    const r = await s.client().post('/sso/start', { email: 'someone@nowhere.test' });
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('sso_not_configured');
  });

  it('refuses a wrong state', async () => {
    const { url, cookie } = await start('bob@acme.test');
    const back = await signInAtIdp(url, 'bob', PASSWORD);
    back.searchParams.set('state', oidc.randomState());
    const r = await callback(back, cookie);
    expect(r.location).toBe('/login?sso_error=flow');
    expect(r.session).toBeNull();
    expect(await s.configStore.getAccountByEmail('bob@acme.test')).toBeNull();
  });

  it('refuses a callback this browser did not start (no flow cookie, or another flow)', async () => {
    const { url } = await start('bob@acme.test');
    const back = await signInAtIdp(url, 'bob', PASSWORD);
    expect((await callback(back, null)).location).toBe('/login?sso_error=flow');
    // The victim's browser has a flow of its own: the attacker's code and state do not match it.
    const victim = await start('bob@acme.test');
    const r = await callback(back, victim.cookie);
    expect(r.location).toMatch(/sso_error=(flow|idp)/);
    expect(r.session).toBeNull();
  });

  it('refuses a replayed code', async () => {
    const { url, cookie } = await start('carol@acme.test');
    const back = await signInAtIdp(url, 'carol', PASSWORD);
    const first = await callback(back, cookie);
    expect(first.session).toBeTruthy();
    // The same redirect again: the flow is used up.
    const replay = await callback(back, cookie);
    expect(replay.location).toBe('/login?sso_error=flow');
    expect(replay.session).toBeNull();
    // With a fresh flow whose state the attacker copies in: the IdP refuses the used code (and the PKCE
    // verifier is the new flow's, not the one the code was issued for).
    const fresh = await start('carol@acme.test');
    const freshState = new URL(fresh.url).searchParams.get('state')!;
    const forged = new URL(back);
    forged.searchParams.set('state', freshState);
    const r = await callback(forged, fresh.cookie);
    expect(r.location).toBe('/login?sso_error=idp');
    expect(r.session).toBeNull();
  });

  it('refuses a wrong issuer in the response', async () => {
    const { url, cookie } = await start('bob@acme.test');
    const back = await signInAtIdp(url, 'bob', PASSWORD);
    back.searchParams.set('iss', other.issuer);
    const r = await callback(back, cookie);
    expect(r.location).toBe('/login?sso_error=idp');
    expect(r.session).toBeNull();
  });

  it('refuses an ID token from another issuer, for another audience, or with another nonce', async () => {
    const tokens = {
      issuer: await idTokenFor(other, 'keyrelay', SECRET, 'bob'),
      audience: await idTokenFor(idp, 'another-app', 'another secret', 'bob'),
      nonce: await idTokenFor(idp, 'keyrelay', SECRET, 'bob'),
    };
    for (const [what, token] of Object.entries(tokens)) {
      const { url, cookie } = await start('bob@acme.test');
      const back = await signInAtIdp(url, 'bob', PASSWORD);
      idp.swapIdToken(token);
      const r = await callback(back, cookie);
      expect(r.location, what).toBe('/login?sso_error=idp');
      expect(r.session, what).toBeNull();
    }
    expect(await s.configStore.getAccountByEmail('bob@acme.test')).toBeNull();
    const failed = await owner.get(`/orgs/${acme}/audit?action=sso.sign_in_failed`);
    expect(failed.json.entries.length).toBeGreaterThanOrEqual(3);
    expect(failed.json.entries[0].after).toMatchObject({ reason: 'idp' });
  });

  it('refuses a person of another domain and an unverified email', async () => {
    // Mallory's IdP account is real, but her email is not of Acme's domains.
    const m = await ssoSignIn('bob@acme.test', 'mallory');
    expect(m.location).toBe('/login?sso_error=domain');
    expect(m.session).toBeNull();
    expect(await s.configStore.getAccountByEmail('mallory@evil.test')).toBeNull();
    const failed = await owner.get(`/orgs/${acme}/audit?action=sso.sign_in_failed`);
    expect(failed.json.entries[0].after).toEqual({ reason: 'domain', email: 'mallory@evil.test' });

    const u = await ssoSignIn('unverified@acme.test', 'unverified');
    expect(u.location).toBe('/login?sso_error=email');
    expect(await s.configStore.getAccountByEmail('unverified@acme.test')).toBeNull();
  });

  it('does not sign in to an account made outside the organization', async () => {
    const outsider = s.client();
    await outsider.signup('outside@acme.test');
    const r = await ssoSignIn('outside@acme.test', 'outside');
    expect(r.location).toBe('/login?sso_error=account');
    expect(r.session).toBeNull();
  });
});

describe('SSO-only', () => {
  it("refuses members' passwords, keeps the owners', and audits the refusal", async () => {
    const member = s.client();
    await member.signup('member@acme.test');
    const memberId = (await s.configStore.getAccountByEmail('member@acme.test'))!.id;
    await s.configStore.setMember(acme, memberId, 'member');
    expect((await s.client().post('/login', { email: 'member@acme.test', password: PASSWORD })).status).toBe(
      200,
    );

    expect((await owner.put(`/orgs/${acme}/sso`, { ...connection(), sso_only: true })).status).toBe(200);
    const refused = await s.client().post('/login', { email: 'member@acme.test', password: PASSWORD });
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe('sso_required');
    expect(refused.headers['set-cookie']).toBeUndefined();
    // A wrong password still answers as any wrong password: the policy is told only to who knows it.
    const wrong = await s
      .client()
      .post('/login', { email: 'member@acme.test', password: 'wrong password 1' });
    expect(wrong.json.error.code).toBe('invalid_credentials');
    // The owner's password is the way in when the IdP is broken.
    expect((await s.client().post('/login', { email: 'owner@acme.test', password: PASSWORD })).status).toBe(
      200,
    );
    // The member signs in through the IdP instead.
    expect((await ssoSignIn('member@acme.test', 'member')).session).toBeTruthy();

    const audit = await owner.get(`/orgs/${acme}/audit?action=sign_in_failed`);
    expect(audit.json.entries[0].after).toMatchObject({ email: 'member@acme.test' });
    await owner.put(`/orgs/${acme}/sso`, connection());
  });
});

describe('SSO-only and sessions already open', () => {
  it("ends members' password sessions at their next request, and keeps their SSO sessions and owners'", async () => {
    expect((await owner.put(`/orgs/${acme}/sso`, connection())).status).toBe(200);
    idp.users.set('dave', { password: PASSWORD, email: 'dave@acme.test' });
    const byPassword = s.client();
    await byPassword.signup('dave@acme.test');
    const dave = (await s.configStore.getAccountByEmail('dave@acme.test'))!.id;
    await s.configStore.setMember(acme, dave, 'member');
    const bySso = s.client();
    bySso.cookie = (await ssoSignIn('dave@acme.test', 'dave')).session!;
    // A second owner, signed in with a password, demoted to member once SSO-only is on.
    const erinClient = s.client();
    await erinClient.signup('erin@acme.test');
    const erin = (await s.configStore.getAccountByEmail('erin@acme.test'))!.id;
    await s.configStore.setMember(acme, erin, 'owner');
    for (const c of [byPassword, bySso, erinClient, owner]) expect((await c.get('/me')).status).toBe(200);

    try {
      expect((await owner.put(`/orgs/${acme}/sso`, { ...connection(), sso_only: true })).status).toBe(200);
      const ended = await byPassword.get('/me');
      expect([ended.status, ended.json.error.code]).toEqual([401, 'not_authenticated']);
      expect(String(ended.headers['set-cookie'])).toMatch(/^kr_session=;/);
      expect((await byPassword.get(`/orgs`)).status).toBe(401);
      expect((await bySso.get('/me')).status).toBe(200);
      expect((await erinClient.get('/me')).status).toBe(200);
      expect((await owner.get('/me')).status).toBe(200);
      await s.configStore.setMember(acme, erin, 'member');
      expect((await erinClient.get('/me')).status).toBe(401);
      expect((await owner.get('/me')).status).toBe(200);
    } finally {
      await owner.put(`/orgs/${acme}/sso`, connection());
    }
    // With password sign-in allowed again, a new password session lives.
    const again = s.client();
    expect((await again.post('/login', { email: 'dave@acme.test', password: PASSWORD })).status).toBe(200);
    expect((await again.get('/me')).status).toBe(200);
  });
});

describe('an identity provider that is down', () => {
  it('answers 502 sso_unavailable at the start, and password sign-in still works', async () => {
    const down = await startIdp({ clients: [], users: {} });
    const issuer = down.issuer;
    await down.close();
    const org = await owner.post('/orgs', { name: 'Down' });
    const put = await owner.put(`/orgs/${org.json.org.id}/sso`, {
      ...connection(),
      issuer,
      domains: ['down.test'],
    });
    expect(put.status).toBe(200);
    const r = await s.client().post('/sso/start', { email: 'x@down.test' });
    expect(r.status).toBe(502);
    expect(r.json.error.code).toBe('sso_unavailable');
    expect((await s.client().post('/login', { email: 'owner@acme.test', password: PASSWORD })).status).toBe(
      200,
    );
  });
});

describe('closed sign-up', () => {
  it('lets members in through SSO but makes no new account', async () => {
    s.config.signup = 'closed';
    try {
      idp.users.set('newcomer', { password: PASSWORD, email: 'newcomer@acme.test' });
      const r = await ssoSignIn('newcomer@acme.test', 'newcomer');
      expect(r.location).toBe('/login?sso_error=closed');
      expect(await s.configStore.getAccountByEmail('newcomer@acme.test')).toBeNull();
      expect((await ssoSignIn('alice@acme.test', 'alice')).session).toBeTruthy();
    } finally {
      s.config.signup = 'open';
    }
  });
});

describe('the sign-in throttle on starts', () => {
  const LIMITS = { windowMs: 15 * 60_000, maxPerEmail: 5, maxPerIp: 3 };
  let t: ConsoleApp;
  let tIdp: Idp;

  beforeAll(async () => {
    // Behind a proxy that names each client's address, so that one test's addresses are its own.
    t = await startConsole({ trustProxy: true, throttle: new MemoryLoginThrottle(LIMITS) });
    t.config.publicUrl = t.base;
    tIdp = await startIdp({
      clients: [
        {
          client_id: 'keyrelay',
          client_secret: SECRET,
          redirect_uris: [`${t.base}/api/console/sso/callback`],
        },
      ],
      users,
    });
    const o = t.client();
    await o.signup('owner@acme.test');
    const org = (await o.post('/orgs', { name: 'Acme' })).json.org.id as string;
    expect((await o.put(`/orgs/${org}/sso`, { ...connection(), issuer: tIdp.issuer })).status).toBe(200);
  }, 30_000);
  afterAll(async () => {
    await tIdp?.close();
    await t?.close();
  });

  const from = (ip: string) => ({ 'x-forwarded-for': ip });

  it('refuses the start past the per-IP limit with the answer a throttled login gets', async () => {
    for (let i = 0; i < LIMITS.maxPerIp; i++) {
      const ok = await t.client().post('/sso/start', { email: `p${i}@acme.test` }, from('198.51.100.7'));
      expect(ok.status, ok.text).toBe(200);
    }
    const refused = await t.client().post('/sso/start', { email: 'alice@acme.test' }, from('198.51.100.7'));
    // A login throttled per IP, from another address: distinct emails, so only the IP's window fills.
    for (let i = 0; i < LIMITS.maxPerIp; i++) {
      const wrong = { email: `nobody${i}@acme.test`, password: 'not the password' };
      expect((await t.client().post('/login', wrong, from('198.51.100.8'))).status).toBe(401);
    }
    const login = await t
      .client()
      .post('/login', { email: 'x@acme.test', password: 'x' }, from('198.51.100.8'));
    expect(login.status).toBe(429);
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual(login.json);
    expect(refused.json.error.code).toBe('too_many_attempts');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(LIMITS.windowMs / 1000);
    expect(refused.headers['set-cookie']).toBeUndefined();
    // Another address is not held back by this one's starts.
    expect((await t.client().post('/sso/start', { email: 'a@acme.test' }, from('198.51.100.9'))).status).toBe(
      200,
    );
  });

  it('takes a completed sign-in back out of the window, as a login does: one address may sign many in', async () => {
    for (let i = 0; i <= LIMITS.maxPerIp; i++) {
      const r = await t.client().post('/sso/start', { email: 'alice@acme.test' }, from('198.51.100.20'));
      expect(r.status, `sign-in ${i + 1}: ${r.text}`).toBe(200);
      const back = await signInAtIdp(r.json.url as string, 'alice', PASSWORD);
      const res = await request(`${t.base}${back.pathname}${back.search}`, {
        headers: { cookie: `kr_sso=${flowCookie(r.headers)}`, ...from('198.51.100.20') },
      });
      await res.body.dump();
      expect([res.statusCode, res.headers.location]).toEqual([303, '/']);
    }
  });
});

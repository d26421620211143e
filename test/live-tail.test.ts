/**
 * The request log's live tail (server-sent events): a request's row reaches a watching console once written,
 * on one instance and across two instances on PostgreSQL and Redis (a request served by B shows on a console
 * served by A); filters narrow it; another account sees nothing; bad input is refused clearly.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { basename } from 'node:path';
import type { Browser } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestSummary } from '../src/store/types.js';
import { callProxy, startPair, waitFor, type Pair } from './helpers/cluster.js';
import { ensureConsoleBuilt, launchBrowser, screenshotBothWidths } from './helpers/browser.js';
import { openTail, seen } from './helpers/tail.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

describe('live tail on one instance', () => {
  let h: Harness;
  let key: string;
  let cookie: string;
  let otherCookie: string;

  const login = async (email: string) => {
    const res = await request(`${h.url}/api/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: h.url },
      body: JSON.stringify({ email, password: 'correct horse battery' }),
    });
    await res.body.dump();
    return String(res.headers['set-cookie']).split(';')[0]!;
  };

  beforeAll(async () => {
    h = await startHarness();
    ({ key } = await h.newUser('tail@example.com'));
    await h.newUser('tail-other@example.com');
    cookie = await login('tail@example.com');
    otherCookie = await login('tail-other@example.com');
  });
  afterAll(() => h.close());

  it('sends each new row of the account, as the list shows it, and only to that account', async () => {
    const tail = await openTail(h.url, cookie);
    const filtered = await openTail(h.url, cookie, '?provider=anthropic');
    const other = await openTail(h.url, otherCookie);
    const r = await callProxy(h.url, key);
    expect(r.status).toBe(200);
    await waitFor('the row on the tail', seen(tail, r.id));
    const row = tail.rows.find((x) => x.id === r.id)!;
    expect(row).toMatchObject({ provider: 'openai', status: 200, model: 'gpt-4o' });
    expect(row).not.toHaveProperty('request_body');
    expect(row).not.toHaveProperty('request_headers');
    const listed = await request(`${h.url}/api/console/requests?limit=1`, { headers: { cookie } });
    const [first] = ((await listed.body.json()) as { items: RequestSummary[] }).items;
    expect(row).toEqual(first);
    // A second row proves the other streams had time to get the first, had they been sent it.
    const again = await callProxy(h.url, key);
    await waitFor('the second row', seen(tail, again.id));
    expect(filtered.rows).toEqual([]);
    expect(other.rows).toEqual([]);
    for (const t of [tail, filtered, other]) t.close();
  });

  it('follows the organization it is opened in, as the list does: an admin every member’s rows, a member their own', async () => {
    const owner = await h.newUser(`tail-owner-${Date.now()}@acme.test`);
    const member = await h.newUser(`tail-member-${Date.now()}@acme.test`);
    const store = h.kr.services.configStore;
    const acme = (
      await store.createOrg({ id: `tail-acme-${Date.now()}`, name: 'Acme', owner_id: owner.accountId })
    ).id;
    await store.setMember(acme, member.accountId, 'member');
    const emailOf = async (id: string) => (await store.getAccountById(id))!.email;
    const ownerCookie = await login(await emailOf(owner.accountId));
    const memberCookie = await login(await emailOf(member.accountId));
    const keyIn = async (cookieOf: string, name: string) => {
      const made = await request(`${h.url}/api/console/keys`, {
        method: 'POST',
        headers: {
          cookie: cookieOf,
          origin: h.url,
          'content-type': 'application/json',
          'x-keyrelay-org': acme,
        },
        body: JSON.stringify({ name }),
      });
      expect(made.statusCode).toBe(201);
      return ((await made.body.json()) as { key: { key: string } }).key.key;
    };
    const memberKey = await keyIn(memberCookie, 'member in acme');
    const ownerAcmeKey = await keyIn(ownerCookie, 'owner in acme');

    const ownerInAcme = await openTail(h.url, ownerCookie, `?org=${acme}`);
    const ownerPersonal = await openTail(h.url, ownerCookie);
    const memberInAcme = await openTail(h.url, memberCookie, `?org=${acme}`);
    const memberPersonal = await openTail(h.url, memberCookie);
    const ownerCall = await callProxy(h.url, owner.key);
    const memberCall = await callProxy(h.url, memberKey);
    const memberOwnCall = await callProxy(h.url, member.key);
    await waitFor('the member’s call on the owner’s tail of Acme', seen(ownerInAcme, memberCall.id));
    await waitFor('the member’s call on their own tail of Acme', seen(memberInAcme, memberCall.id));
    await waitFor('the owner’s personal call on their personal tail', seen(ownerPersonal, ownerCall.id));
    await waitFor(
      'the member’s personal call on their personal tail',
      seen(memberPersonal, memberOwnCall.id),
    );
    const ids = (t: { rows: RequestSummary[] }) => t.rows.map((r) => r.id);
    expect(ids(ownerInAcme)).toEqual([memberCall.id]);
    expect(ids(memberInAcme)).toEqual([memberCall.id]);
    expect(ids(ownerPersonal)).toEqual([ownerCall.id]);
    expect(ids(memberPersonal)).toEqual([memberOwnCall.id]);

    // Not a member: refused as the list is. Removed: the open stream ends at its next check.
    const stranger = await request(`${h.url}/api/console/requests/tail?org=${acme}`, { headers: { cookie } });
    expect(stranger.statusCode).toBe(404);
    await stranger.body.dump();
    await store.removeMember(acme, member.accountId);
    await waitFor('the removed member’s stream to end', async () => {
      await callProxy(h.url, ownerAcmeKey);
      return memberInAcme.ended() ? true : undefined;
    });
    for (const t of [ownerInAcme, ownerPersonal, memberInAcme, memberPersonal]) t.close();
  });

  it('ends the stream once its session is gone, and refuses the reconnect', async () => {
    const own = await login('tail@example.com');
    const tail = await openTail(h.url, own);
    const before = await callProxy(h.url, key);
    await waitFor('a row while signed in', seen(tail, before.id));
    const out = await request(`${h.url}/api/console/logout`, {
      method: 'POST',
      headers: { cookie: own, origin: h.url, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(out.statusCode).toBeLessThan(300);
    await out.body.dump();
    await waitFor('the stream to end', async () => {
      await callProxy(h.url, key);
      return tail.ended() ? true : undefined;
    });
    // Rows written in the moment before the session was read again may still come; none after the end.
    const last = await callProxy(h.url, key);
    await h.flushLog();
    expect(tail.rows.map((r) => r.id)).not.toContain(last.id);
    // The browser's reconnect is refused: the session is gone.
    const again = await request(`${h.url}/api/console/requests/tail`, { headers: { cookie: own } });
    expect(again.statusCode).toBe(401);
    await again.body.dump();
  });

  it('refuses an unknown filter and a caller without a session', async () => {
    const bad = await request(`${h.url}/api/console/requests/tail?q=words`, { headers: { cookie } });
    expect(bad.statusCode).toBe(400);
    expect(((await bad.body.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
    const anon = await request(`${h.url}/api/console/requests/tail`);
    expect(anon.statusCode).toBe(401);
    await anon.body.dump();
  });
});

describe('live tail in the console (Chromium)', () => {
  let h: Harness;
  let key: string;
  let browser: Browser;

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    ({ key } = await h.newUser('tail-ui@example.com'));
    browser = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('shows new requests as they finish, holds them while paused, and shows them on resume', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    const login = await page.request.post(`${h.url}/api/console/login`, {
      data: { email: 'tail-ui@example.com', password: 'correct horse battery' },
      headers: { origin: h.url },
    });
    expect(login.status()).toBe(200);
    await page.goto(`${h.url}/requests`);
    await page.getByText('No requests yet').waitFor();
    const opened = page.waitForResponse((r) => r.url().includes('/api/console/requests/tail'));
    await page.getByRole('button', { name: 'Live' }).click();
    await opened;
    const rows = page.locator('table.requests-table tbody tr.clickable');
    expect((await callProxy(h.url, key)).status).toBe(200);
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(1);

    await page.getByRole('button', { name: 'Pause' }).click();
    expect((await callProxy(h.url, key)).status).toBe(200);
    await page.getByRole('button', { name: 'Resume (1 new)' }).waitFor();
    expect(await rows.count()).toBe(1);
    await page.getByRole('button', { name: 'Resume (1 new)' }).click();
    await expect.poll(() => rows.count()).toBe(2);
    mkdirSync('/tmp/ins/shots', { recursive: true });
    for (const f of await screenshotBothWidths(page, 'requests-live'))
      copyFileSync(f, `/tmp/ins/shots/${basename(f)}`);

    // A search cannot be followed live: the button says why instead.
    await page.goto(`${h.url}/requests?q=hello`);
    await expect.poll(() => page.getByRole('button', { name: 'Live' }).isDisabled()).toBe(true);
  }, 60_000);
});

describe('live tail across two instances on PostgreSQL and Redis', () => {
  let pair: Pair;

  beforeAll(async () => {
    pair = await startPair('tail');
  }, 120_000);
  afterAll(() => pair?.close(), 120_000);

  it('shows on a console served by A the request served by B', async () => {
    const made = await pair.onA.post('/keys', { name: 'tail' });
    expect(made.status).toBe(201);
    const tail = await openTail(pair.a.url, `kr_session=${pair.onA.cookie}`);
    const r = await callProxy(pair.b.url, made.json.key.key as string);
    expect(r.status).toBe(200);
    await waitFor('B’s row on A’s tail', seen(tail, r.id));
    // And A's own rows too, once.
    const own = await callProxy(pair.a.url, made.json.key.key as string);
    await waitFor('A’s row on A’s tail', seen(tail, own.id));
    expect(tail.rows.filter((x) => x.id === own.id)).toHaveLength(1);
    tail.close();
  }, 60_000);
});

/**
 * Service keys belong to the organization, not to the admin who created them (their request rows carry the
 * creator's account only because a row needs one). Once that admin is demoted to member, the console API
 * shows them their own keys and rows only: not the service key, not its calls, not its spend, not the
 * provider credential only it sends, and not on the live tail.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from './console-harness.js';
import { waitFor } from './helpers/cluster.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { openTail, seen } from './helpers/tail.js';

describe('a service key’s creator demoted to member', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.close());

  /** The service key's calls send the organization's provider credential; the admin's own key, theirs. */
  const SERVICE_CREDENTIAL = 'sk-proj-acmeServiceAAAAAAAAAAAAAAAA';
  const OWN_CREDENTIAL = 'sk-proj-adminOwnBBBBBBBBBBBBBBBBBBB';
  const chat = (key: string, apiKey: string) =>
    new OpenAI({
      apiKey,
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': key },
      maxRetries: 0,
    }).chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();

  it('sees neither the service key nor its request rows nor its spend', async () => {
    const o = await h.newUser(`owner-${Date.now()}@acme.test`);
    const a = await h.newUser(`admin-${Date.now()}@acme.test`);
    const store = h.kr.services.configStore;
    const acme = (await store.createOrg({ id: `acme-${Date.now()}`, name: 'Acme', owner_id: o.accountId }))
      .id;
    await store.setMember(acme, a.accountId, 'admin');
    const admin = new Client(h.url);
    const email = (await store.getAccountById(a.accountId))!.email;
    expect((await admin.post('/login', { email, password: 'correct horse battery' })).status).toBe(200);
    const inAcme = { 'x-keyrelay-org': acme };
    const service = await admin.post('/keys', { name: 'ci', service: true }, inAcme);
    const own = await admin.post('/keys', { name: 'mine' }, inAcme);
    expect([service.status, own.status]).toEqual([201, 201]);
    const serviceKey = service.json.key.key as string;
    const ownKey = own.json.key.key as string;
    const cookie = `kr_session=${admin.cookie}`;
    const tail = await openTail(h.url, cookie, `?org=${acme}`);
    const serviceCall = await chat(serviceKey, SERVICE_CREDENTIAL);
    const ownCall = await chat(ownKey, OWN_CREDENTIAL);
    const serviceRow = serviceCall.response.headers.get('x-keyrelay-request-id')!;
    const ownRow = ownCall.response.headers.get('x-keyrelay-request-id')!;
    await h.flushLog();
    // As admin: the organization's keys and rows, the service key's among them, live too.
    expect((await admin.get('/requests', inAcme)).json.items.map((r: { id: string }) => r.id).sort()).toEqual(
      [serviceRow, ownRow].sort(),
    );
    await waitFor('both rows on the tail', async () =>
      (await seen(tail, serviceRow)()) && (await seen(tail, ownRow)()) ? true : undefined,
    );
    const credentials = async () =>
      ((await admin.get('/credentials')).json.credentials as { requests: number }[]).map((c) => c.requests);
    expect(await credentials()).toEqual([1, 1]);

    await store.setMember(acme, a.accountId, 'member');
    const keys = (await admin.get('/keys', inAcme)).json.keys as { id: string; name: string }[];
    expect(keys.map((k) => k.name)).toEqual(['mine']);
    const rows = (await admin.get('/requests', inAcme)).json.items as { id: string }[];
    expect(rows.map((r) => r.id)).toEqual([ownRow]);
    expect((await admin.get(`/requests/${serviceRow}`, inAcme)).status).toBe(404);
    expect((await admin.get(`/requests/${ownRow}`, inAcme)).status).toBe(200);
    const byKey = (await admin.get('/usage/breakdown?by=key_id', inAcme)).json;
    expect(JSON.stringify(byKey)).not.toContain(service.json.key.id as string);
    const exported = await admin.get('/requests/export?format=csv', inAcme);
    expect(exported.status).toBe(200);
    expect(exported.text).toContain(ownRow);
    expect(exported.text).not.toContain(serviceRow);
    // The account's own credentials page no longer counts the organization's credential.
    expect(await credentials()).toEqual([1]);
    // The open tail narrows at its next check of the caller's role: a later service call stays off it.
    await new Promise((r) => setTimeout(r, 2_100));
    const laterService = (await chat(serviceKey, SERVICE_CREDENTIAL)).response.headers.get(
      'x-keyrelay-request-id',
    )!;
    const laterOwn = (await chat(ownKey, OWN_CREDENTIAL)).response.headers.get('x-keyrelay-request-id')!;
    await waitFor('the later own row on the tail', seen(tail, laterOwn));
    expect(tail.rows.map((r) => r.id)).not.toContain(laterService);
    tail.close();
    // The owner still sees both.
    const owner = new Client(h.url);
    const ownerEmail = (await store.getAccountById(o.accountId))!.email;
    await owner.post('/login', { email: ownerEmail, password: 'correct horse battery' });
    expect((await owner.get('/requests', inAcme)).json.items).toHaveLength(4);
  });
});

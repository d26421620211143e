/**
 * Service keys belong to the organization, not to the admin who created them (their request rows carry the
 * creator's account only because a row needs one). Once that admin is demoted to member, the console API
 * shows them their own keys and rows only: not the service key, not its calls, not its spend.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from './console-harness.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

describe('a service key’s creator demoted to member', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.close());

  const chat = (key: string) =>
    new OpenAI({
      apiKey: 'sk-fake',
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
    const serviceCall = await chat(service.json.key.key as string);
    const ownCall = await chat(own.json.key.key as string);
    const serviceRow = serviceCall.response.headers.get('x-keyrelay-request-id')!;
    const ownRow = ownCall.response.headers.get('x-keyrelay-request-id')!;
    await h.flushLog();
    // As admin: the organization's keys and rows, the service key's among them.
    expect((await admin.get('/requests', inAcme)).json.items.map((r: { id: string }) => r.id).sort()).toEqual(
      [serviceRow, ownRow].sort(),
    );

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
    // The owner still sees both.
    const owner = new Client(h.url);
    const ownerEmail = (await store.getAccountById(o.accountId))!.email;
    await owner.post('/login', { email: ownerEmail, password: 'correct horse battery' });
    expect((await owner.get('/requests', inAcme)).json.items).toHaveLength(2);
  });
});

/**
 * Organizations in the console API: every route run as every role of one organization, as an outsider
 * (a member of another organization only) and with a forged organization id, each with its expected answer;
 * then invitations, removal and the last owner.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyEvent } from '../src/keys/events.js';
import { makeLogRow } from './helpers/log-rows.js';
import { startConsole, type Client, type ConsoleApp, type Reply } from './console-harness.js';

const PASSWORD = 'correct horse battery';
type Who = 'owner' | 'admin' | 'member' | 'viewer' | 'outsider' | 'forged';
const WHO: readonly Who[] = ['owner', 'admin', 'member', 'viewer', 'outsider', 'forged'];

let s: ConsoleApp;
const clients = {} as Record<Exclude<Who, 'forged'>, Client>;
const ids = {} as Record<Exclude<Who, 'forged'>, string>;
let acme: string;
let adminKey: string;
let adminRow: string;
let throwaways = 0;

/** Joins `client` to the organization through an invitation made by the owner; returns the accept reply. */
async function join(client: Client, role: string): Promise<Reply> {
  const inv = await clients.owner.post(`/orgs/${acme}/invites`, { role });
  expect(inv.status).toBe(201);
  return client.post('/invites/accept', { token: inv.json.token });
}

beforeAll(async () => {
  s = await startConsole();
  for (const who of ['owner', 'admin', 'member', 'viewer', 'outsider'] as const) {
    clients[who] = s.client();
    const login = await clients[who].signup(`${who}@example.com`);
    ids[who] = login.json.account.id;
  }
  const created = await clients.owner.post('/orgs', { name: 'Acme' });
  expect(created.status).toBe(201);
  acme = created.json.org.id;
  for (const who of ['admin', 'member', 'viewer'] as const) {
    const r = await join(clients[who], who);
    expect(r.status).toBe(200);
    expect(r.json.org).toMatchObject({ id: acme, name: 'Acme', role: who });
    // A role that may hold keys gets its default key in the organization, shown once; a viewer none.
    if (who === 'viewer') expect(r.json.key).toBeNull();
    else expect(r.json.key).toMatchObject({ name: 'default', org_id: acme, account_id: ids[who] });
    if (who === 'admin') adminKey = r.json.key.id;
  }
  const rows = [
    makeLogRow({ account_id: ids.admin, org_id: acme, key_id: adminKey }),
    makeLogRow({ account_id: ids.member, org_id: acme, key_id: 'member-key' }),
    makeLogRow({ account_id: ids.outsider, org_id: ids.outsider, key_id: 'outsider-key' }),
  ];
  adminRow = rows[0]!.id;
  await s.logStore.insertBatch(rows);
});

afterAll(async () => {
  await s.close();
});

/** The caller's client, and the organization id it names (a forged one: another organization's). */
function caller(who: Who): { c: Client; org: string } {
  if (who === 'forged') return { c: clients.member, org: ids.outsider };
  return { c: clients[who], org: acme };
}
const inOrg = (org: string) => ({ 'x-keyrelay-org': org });
/** The account a client is signed in as. */
const idOf = (c: Client): string =>
  ids[(Object.keys(clients) as (keyof typeof clients)[]).find((w) => clients[w] === c)!];

/** A public address written as one: nothing is resolved, and nothing is sent (the rule is never crossed). */
const ALERT_RULE = {
  name: 'half the budget',
  kind: 'budget',
  params: { budget_usd: 1000, period: 'month', thresholds: [50] },
  url: 'https://203.0.114.10/hooks/keyrelay',
};

/** A fresh alert rule of the organization, made by its owner. */
async function ownerRule(): Promise<string> {
  const r = await clients.owner.post(`/orgs/${acme}/alerts`, ALERT_RULE);
  expect(r.status).toBe(201);
  return r.json.id as string;
}

/** A fresh key held by the member (so every caller acts on a key of its own case). */
async function memberKey(): Promise<string> {
  const r = await clients.member.post('/keys', { name: 'target' }, inOrg(acme));
  expect(r.status).toBe(201);
  return r.json.key.id as string;
}

/** A fresh service key of the organization (made by the owner). */
async function serviceKey(): Promise<string> {
  const r = await clients.owner.post('/keys', { name: 'svc', service: true }, inOrg(acme));
  expect(r.status).toBe(201);
  return r.json.key.id as string;
}

/** A fresh account joined as a member, for the routes that change or remove one. */
async function throwaway(): Promise<string> {
  const id = `throwaway-${++throwaways}`;
  await s.configStore.createAccount({ id, email: `${id}@example.com`, password_hash: 'x' });
  await s.configStore.setMember(acme, id, 'member');
  return id;
}

async function pendingInvite(): Promise<string> {
  const r = await clients.owner.post(`/orgs/${acme}/invites`, { role: 'member' });
  return r.json.invite.id as string;
}

type Case = [name: string, run: (c: Client, org: string) => Promise<Reply>, expected: Record<Who, number>];
const all = (ok: number): Record<Who, number> => ({
  owner: ok,
  admin: ok,
  member: ok,
  viewer: ok,
  outsider: 404,
  forged: 404,
});
const writers = (ok: number): Record<Who, number> => ({ ...all(ok), viewer: 403 });
const managers = (ok: number): Record<Who, number> => ({ ...all(ok), member: 403, viewer: 403 });

const CASES: Case[] = [
  ['GET /keys', (c, org) => c.get('/keys', inOrg(org)), all(200)],
  ['POST /keys', (c, org) => c.post('/keys', { name: 'mine' }, inOrg(org)), writers(201)],
  [
    'POST /keys (a service key)',
    (c, org) => c.post('/keys', { name: 'svc', service: true }, inOrg(org)),
    { ...managers(201) },
  ],
  // A service key is no member's: a member cannot see it, so it answers like a missing one.
  [
    'PATCH /keys/:id (a service key)',
    async (c, org) =>
      c.patch(`/keys/${await serviceKey()}`, { budget_usd: 5, budget_period: 'day' }, inOrg(org)),
    { ...managers(200), member: 404 },
  ],
  [
    'POST /keys/:id/roll (a service key)',
    async (c, org) => c.post(`/keys/${await serviceKey()}/roll`, { grace_seconds: 0 }, inOrg(org)),
    { ...managers(201), member: 404 },
  ],
  [
    'POST /keys/:id/revoke (a service key)',
    async (c, org) => c.post(`/keys/${await serviceKey()}/revoke`, {}, inOrg(org)),
    { ...managers(200), member: 404 },
  ],
  [
    'PATCH /keys/:id',
    async (c, org) => c.patch(`/keys/${await memberKey()}`, { name: 'x' }, inOrg(org)),
    writers(200),
  ],
  [
    'PATCH /keys/:id (limits)',
    async (c, org) => c.patch(`/keys/${await memberKey()}`, { rate_limit_rpm: 5 }, inOrg(org)),
    writers(200),
  ],
  [
    'POST /keys/:id/roll',
    async (c, org) => c.post(`/keys/${await memberKey()}/roll`, { grace_seconds: 0 }, inOrg(org)),
    writers(201),
  ],
  [
    'POST /keys/:id/revoke',
    async (c, org) => c.post(`/keys/${await memberKey()}/revoke`, {}, inOrg(org)),
    writers(200),
  ],
  // Another member's key: a member cannot see it, so it answers like a missing one.
  [
    'POST /keys/:id/revoke (the admin’s key)',
    (c, org) => c.post(`/keys/${adminKey}/revoke`, {}, inOrg(org)),
    { ...writers(200), member: 404 },
  ],
  ['GET /requests', (c, org) => c.get('/requests', inOrg(org)), all(200)],
  [
    'GET /requests/:id (the admin’s row)',
    (c, org) => c.get(`/requests/${adminRow}`, inOrg(org)),
    { ...all(200), member: 404 },
  ],
  ['GET /usage/series', (c, org) => c.get('/usage/series', inOrg(org)), all(200)],
  ['GET /usage/breakdown', (c, org) => c.get('/usage/breakdown', inOrg(org)), all(200)],
  ['GET /orgs/:org', (c, org) => c.get(`/orgs/${org}`), all(200)],
  [
    'PATCH /orgs/:org',
    (c, org) => c.patch(`/orgs/${org}`, { name: 'Acme' }),
    { ...managers(200), admin: 403 },
  ],
  ['GET /orgs/:org/members', (c, org) => c.get(`/orgs/${org}/members`), all(200)],
  [
    'PATCH /orgs/:org/members/:account',
    async (c, org) => c.patch(`/orgs/${org}/members/${await throwaway()}`, { role: 'viewer' }),
    managers(200),
  ],
  [
    'PATCH /orgs/:org/members/:account (to owner)',
    async (c, org) => c.patch(`/orgs/${org}/members/${await throwaway()}`, { role: 'owner' }),
    { ...managers(200), admin: 403 },
  ],
  // A member's limits across their keys: admins read and set anyone's (an owner's: owners only); a member
  // reads their own and nobody else's.
  [
    'GET /orgs/:org/members/:account/limits (the admin’s)',
    (c, org) => c.get(`/orgs/${org}/members/${ids.admin}/limits`),
    { ...all(200), member: 403 },
  ],
  [
    'GET /orgs/:org/members/:account/limits (one’s own)',
    (c, org) => c.get(`/orgs/${org}/members/${idOf(c)}/limits`),
    all(200),
  ],
  [
    'PATCH /orgs/:org/members/:account/limits',
    async (c, org) =>
      c.patch(`/orgs/${org}/members/${await throwaway()}/limits`, { budget_usd: 5, budget_mode: 'hard' }),
    managers(200),
  ],
  [
    'PATCH /orgs/:org/members/:account/limits (one’s own)',
    (c, org) => c.patch(`/orgs/${org}/members/${idOf(c)}/limits`, { rate_limit_rpm: 1000 }),
    managers(200),
  ],
  [
    'PATCH /orgs/:org/members/:account/limits (the owner’s)',
    (c, org) => c.patch(`/orgs/${org}/members/${ids.owner}/limits`, { rate_limit_rpm: 1000 }),
    { ...managers(200), admin: 403 },
  ],
  [
    'POST /orgs/:org/members/:account/remove',
    async (c, org) => c.post(`/orgs/${org}/members/${await throwaway()}/remove`, {}),
    managers(200),
  ],
  ['GET /orgs/:org/invites', (c, org) => c.get(`/orgs/${org}/invites`), managers(200)],
  ['GET /orgs/:org/audit', (c, org) => c.get(`/orgs/${org}/audit`), managers(200)],
  ['GET /orgs/:org/audit/export', (c, org) => c.get(`/orgs/${org}/audit/export`), managers(200)],
  ['GET /orgs/:org/audit/retention', (c, org) => c.get(`/orgs/${org}/audit/retention`), managers(200)],
  [
    'PUT /orgs/:org/audit/retention',
    (c, org) => c.put(`/orgs/${org}/audit/retention`, { retention_days: null }),
    { ...managers(200), admin: 403 },
  ],
  ['POST /orgs/:org/invites', (c, org) => c.post(`/orgs/${org}/invites`, { role: 'member' }), managers(201)],
  [
    'POST /orgs/:org/invites (as owner)',
    (c, org) => c.post(`/orgs/${org}/invites`, { role: 'owner' }),
    { ...managers(201), admin: 403 },
  ],
  ['GET /orgs/:org/alerts', (c, org) => c.get(`/orgs/${org}/alerts`), managers(200)],
  ['POST /orgs/:org/alerts', (c, org) => c.post(`/orgs/${org}/alerts`, ALERT_RULE), managers(201)],
  [
    'PATCH /orgs/:org/alerts/:id',
    async (c, org) => c.patch(`/orgs/${org}/alerts/${await ownerRule()}`, { enabled: false }),
    managers(200),
  ],
  [
    'DELETE /orgs/:org/alerts/:id',
    async (c, org) => c.delete(`/orgs/${org}/alerts/${await ownerRule()}`),
    managers(204),
  ],
  ['GET /orgs/:org/alert-deliveries', (c, org) => c.get(`/orgs/${org}/alert-deliveries`), managers(200)],
  [
    'POST /orgs/:org/invites/:id/revoke',
    async (c, org) => c.post(`/orgs/${org}/invites/${await pendingInvite()}/revoke`, {}),
    managers(204),
  ],
  ['GET /orgs/:org/sso', (c, org) => c.get(`/orgs/${org}/sso`), { ...managers(200), admin: 403 }],
  [
    'PUT /orgs/:org/sso',
    (c, org) =>
      c.put(`/orgs/${org}/sso`, {
        issuer: 'https://idp.example.com',
        client_id: 'keyrelay',
        client_secret: 'secret',
        domains: ['acme-sso.test'],
        default_role: 'member',
        sso_only: false,
      }),
    { ...managers(200), admin: 403 },
  ],
  [
    'DELETE /orgs/:org/sso',
    (c, org) => c.call('DELETE', `/orgs/${org}/sso`, {}),
    { ...managers(204), admin: 403 },
  ],
];

describe('every console route as every role', () => {
  it.each(CASES)('%s', async (_name, run, expected) => {
    const got = {} as Record<Who, number>;
    for (const who of WHO) {
      const { c, org } = caller(who);
      const r = await run(c, org);
      got[who] = r.status;
      if (r.status === 404 && (who === 'outsider' || who === 'forged'))
        expect(r.json.error.code).toBe('org_not_found');
      if (r.status === 403) expect(r.json.error.code).toBe('forbidden');
    }
    expect(got).toEqual(expected);
  });

  it('routes of the account itself answer every signed-in caller, and nobody else', async () => {
    for (const who of ['owner', 'viewer', 'outsider'] as const) {
      expect((await clients[who].get('/me')).status).toBe(200);
      expect((await clients[who].get('/batches')).status).toBe(200);
      const orgs = await clients[who].get('/orgs');
      expect(orgs.status).toBe(200);
      // The personal organization first, under the account's id.
      expect(orgs.json.orgs[0]).toMatchObject({ id: ids[who], personal: true, role: 'owner' });
      expect(orgs.json.orgs.some((o: { id: string }) => o.id === acme)).toBe(who !== 'outsider');
    }
    const anonymous = s.client();
    for (const path of ['/orgs', `/orgs/${acme}`, `/orgs/${acme}/members`, '/keys']) {
      expect((await anonymous.get(path, inOrg(acme))).status).toBe(401);
    }
  });

  it('a member sees only their own keys and rows; a viewer and an admin see all', async () => {
    const keysOf = async (who: 'member' | 'viewer' | 'admin') =>
      new Set(
        ((await clients[who].get('/keys', inOrg(acme))).json.keys as { account_id: string }[]).map(
          (k) => k.account_id,
        ),
      );
    expect(await keysOf('member')).toEqual(new Set([ids.member]));
    expect((await keysOf('viewer')).has(ids.admin)).toBe(true);
    expect((await keysOf('admin')).has(ids.member)).toBe(true);
    const rowsOf = async (who: 'member' | 'viewer') =>
      (
        (await clients[who].get('/requests', inOrg(acme))).json.items as {
          account_id: string;
          org_id: string;
        }[]
      ).map((r) => [r.org_id, r.account_id]);
    expect(await rowsOf('member')).toEqual([[acme, ids.member]]);
    expect((await rowsOf('viewer')).sort()).toEqual(
      [
        [acme, ids.admin],
        [acme, ids.member],
      ].sort(),
    );
    // Without the header: the personal organization, which holds none of Acme's rows.
    expect((await clients.member.get('/requests')).json.items).toEqual([]);
  });
});

describe('invitations', () => {
  it('are single use, expire, carry their role, and show their token only once', async () => {
    const inv = await clients.admin.post(`/orgs/${acme}/invites`, { role: 'viewer' });
    expect(inv.status).toBe(201);
    expect(inv.json.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const listed = await clients.admin.get(`/orgs/${acme}/invites`);
    expect(JSON.stringify(listed.json)).not.toContain(inv.json.token);
    expect(
      listed.json.invites.some(
        (i: { id: string; role: string }) => i.id === inv.json.invite.id && i.role === 'viewer',
      ),
    ).toBe(true);
    const preview = await s.client().post('/invites/preview', { token: inv.json.token });
    expect(preview.json).toMatchObject({ org: { name: 'Acme' }, role: 'viewer' });

    const a = s.client();
    await a.signup('invitee-a@example.com');
    // Already a member: refused, and the invitation stays usable.
    expect((await clients.member.post('/invites/accept', { token: inv.json.token })).status).toBe(409);
    const ok = await a.post('/invites/accept', { token: inv.json.token });
    expect(ok.status).toBe(200);
    expect(ok.json.org).toMatchObject({ id: acme, role: 'viewer' });
    const b = s.client();
    await b.signup('invitee-b@example.com');
    const reused = await b.post('/invites/accept', { token: inv.json.token });
    expect(reused.status).toBe(410);
    expect(reused.json.error.code).toBe('invite_invalid');
    expect((await b.post('/invites/accept', { token: 'x'.repeat(43) })).status).toBe(410);

    // Made eight days ago: past its seven.
    s.advance(-8 * 86_400_000);
    const later = await clients.owner.post(`/orgs/${acme}/invites`, { role: 'member' });
    s.advance(8 * 86_400_000);
    expect((await b.post('/invites/accept', { token: later.json.token })).status).toBe(410);
    expect((await s.client().post('/invites/preview', { token: later.json.token })).status).toBe(410);
    expect((await b.get(`/orgs/${acme}`)).status).toBe(404);
  });

  it('invite-only sign-up refuses a stranger and lets the invitee in', async () => {
    const closed = await startConsole({ config: { signup: 'invite' } });
    try {
      const boss = closed.client();
      await boss.signup('boss@example.com'); // the first account: the bootstrap
      const stranger = await closed
        .client()
        .post('/signup', { email: 'stranger@example.com', password: PASSWORD });
      expect(stranger.status).toBe(403);
      expect(stranger.json.error.code).toBe('signup_closed');
      const bad = await closed
        .client()
        .post('/signup', { email: 'x@example.com', password: PASSWORD, invite: 'y'.repeat(43) });
      expect(bad.status).toBe(410);
      const team = (await boss.post('/orgs', { name: 'Team' })).json.org.id as string;
      const inv = await boss.post(`/orgs/${team}/invites`, { role: 'member' });
      const guest = closed.client();
      expect(
        (
          await guest.post('/signup', {
            email: 'guest@example.com',
            password: PASSWORD,
            invite: inv.json.token,
          })
        ).status,
      ).toBe(202);
      expect((await guest.post('/login', { email: 'guest@example.com', password: PASSWORD })).status).toBe(
        200,
      );
      const joined = await guest.post('/invites/accept', { token: inv.json.token });
      expect(joined.status).toBe(200);
      expect(joined.json.key).toMatchObject({ org_id: team, name: 'default' });
    } finally {
      await closed.close();
    }
  });
});

describe('removing a member', () => {
  it('revokes the keys they hold there, at once on the key bus, and their session no longer reaches it', async () => {
    const c = s.client();
    const { json } = await c.signup('leaving@example.com');
    const accountId = json.account.id as string;
    const joined = await join(c, 'member');
    const second = await c.post('/keys', { name: 'second' }, inOrg(acme));
    const own = (await c.get('/keys')).json.keys[0].id as string; // the personal default key stays
    const events: KeyEvent[] = [];
    s.bus.subscribe((e) => events.push(e));
    const r = await clients.admin.post(`/orgs/${acme}/members/${accountId}/remove`, {});
    expect(r.status).toBe(200);
    expect(new Set(r.json.revoked)).toEqual(new Set([joined.json.key.id, second.json.key.id]));
    expect(events).toEqual(
      expect.arrayContaining(r.json.revoked.map((id: string) => ({ type: 'key_changed', key_id: id }))),
    );
    for (const id of r.json.revoked) expect((await s.configStore.getKey(id))?.revoked_at).not.toBeNull();
    expect((await s.configStore.getKey(own))?.revoked_at).toBeNull();
    for (const path of ['/keys', '/requests']) {
      const refused = await c.get(path, inOrg(acme));
      expect(refused.status).toBe(404);
      expect(refused.json.error.code).toBe('org_not_found');
    }
    expect((await c.get(`/orgs/${acme}/members`)).status).toBe(404);
  });

  it('or hands their keys to another member, still working', async () => {
    const c = s.client();
    const { json } = await c.signup('handing@example.com');
    const joined = await join(c, 'member');
    const r = await clients.owner.post(`/orgs/${acme}/members/${json.account.id}/remove`, {
      transfer_to: ids.admin,
    });
    expect(r.status).toBe(200);
    expect(r.json.transferred).toEqual([joined.json.key.id]);
    expect(await s.configStore.getKey(joined.json.key.id)).toMatchObject({
      account_id: ids.admin,
      revoked_at: null,
    });
    // Not to a viewer (who holds no keys), nor to someone outside.
    const d = s.client();
    const other = await d.signup('handing2@example.com');
    await join(d, 'member');
    for (const to of [ids.viewer, ids.outsider]) {
      const refused = await clients.owner.post(`/orgs/${acme}/members/${other.json.account.id}/remove`, {
        transfer_to: to,
      });
      expect(refused.status).toBe(404);
    }
  });

  it('keeps at least one owner', async () => {
    const team = (await clients.owner.post('/orgs', { name: 'Solo' })).json.org.id as string;
    const inv = await clients.owner.post(`/orgs/${team}/invites`, { role: 'admin' });
    expect((await clients.admin.post('/invites/accept', { token: inv.json.token })).status).toBe(200);
    const r = await clients.owner.patch(`/orgs/${team}/members/${ids.owner}`, { role: 'admin' });
    expect(r.status).toBe(409);
    expect(r.json.error.code).toBe('last_owner');
    expect((await clients.owner.post(`/orgs/${team}/members/${ids.owner}/remove`, {})).status).toBe(409);
    expect((await clients.admin.post(`/orgs/${team}/members/${ids.owner}/remove`, {})).status).toBe(403);
    expect((await clients.admin.patch(`/orgs/${team}/members/${ids.admin}`, { role: 'owner' })).status).toBe(
      403,
    );
  });
});

describe('service keys', () => {
  it('are the organization’s: no member holds them, removing their creator leaves them working', async () => {
    const c = s.client();
    const { json } = await c.signup('svc-admin@example.com');
    const creator = json.account.id as string;
    await join(c, 'admin');
    const made = await c.post('/keys', { name: 'ci', service: true }, inOrg(acme));
    expect(made.status).toBe(201);
    expect(made.json.key).toMatchObject({ name: 'ci', service: true, org_id: acme, account_id: creator });
    expect(made.json.key.key).toMatch(/^kr_/);
    const id = made.json.key.id as string;
    // Listed as such to whoever sees every key; not to a member.
    const listed = (who: 'viewer' | 'member') =>
      clients[who].get('/keys', inOrg(acme)).then((r) => r.json.keys as { id: string; service: boolean }[]);
    expect((await listed('viewer')).find((k) => k.id === id)?.service).toBe(true);
    expect((await listed('member')).some((k) => k.id === id)).toBe(false);
    // A roll keeps it a service key.
    const rolled = await clients.admin.post(`/keys/${id}/roll`, { grace_seconds: 60 }, inOrg(acme));
    expect(rolled.json.key).toMatchObject({ service: true, org_id: acme });
    const fresh = rolled.json.key.id as string;
    // Removing the creator revokes the keys they hold, not the organization's.
    const removed = await clients.owner.post(`/orgs/${acme}/members/${creator}/remove`, {});
    expect(removed.status).toBe(200);
    expect(removed.json.revoked).not.toContain(id);
    expect(removed.json.revoked).not.toContain(fresh);
    expect(removed.json.revoked.length).toBe(1); // the default key the invitation gave
    expect(await s.configStore.getKey(fresh)).toMatchObject({ revoked_at: null, service: true });
    // Nor hands them to another member.
    const c2 = s.client();
    const second = await c2.signup('svc-admin2@example.com');
    await join(c2, 'admin');
    const svc2 = (await c2.post('/keys', { name: 'ci2', service: true }, inOrg(acme))).json.key.id as string;
    const handed = await clients.owner.post(`/orgs/${acme}/members/${second.json.account.id}/remove`, {
      transfer_to: ids.member,
    });
    expect(handed.json.transferred).not.toContain(svc2);
    expect((await listed('member')).some((k) => k.id === svc2)).toBe(false);
    // The audit log says it is a service key and names no holder.
    const entries = (await clients.owner.get(`/orgs/${acme}/audit?action=key.create&limit=500`)).json
      .entries as { target: string; after: Record<string, unknown> }[];
    expect(entries.find((e) => e.target === id)?.after).toMatchObject({ service: true, holder: null });
  });
});

describe('limits per member', () => {
  it('an admin sets them (audited with before and after), the member sees them on their Keys page, bad input is refused', async () => {
    const member = await throwaway();
    const set = await clients.admin.patch(`/orgs/${acme}/members/${member}/limits`, {
      budget_usd: 25,
      budget_period: 'day',
      budget_mode: 'hard',
      rate_limit_rpm: 60,
    });
    expect(set.status, set.text).toBe(200);
    expect(set.json.limits).toEqual({
      rate_limit_rpm: 60,
      budget_usd: 25,
      budget_period: 'day',
      budget_mode: 'hard',
    });
    expect(set.json.budget).toMatchObject({ spent_usd: 0, budget_usd: 25 });
    // A field left out keeps its value; null clears one (the mode stays).
    const cleared = await clients.admin.patch(`/orgs/${acme}/members/${member}/limits`, { budget_usd: null });
    expect(cleared.json).toEqual({
      limits: { rate_limit_rpm: 60, budget_usd: null, budget_period: null, budget_mode: 'hard' },
      budget: null,
    });
    const members = await clients.viewer.get(`/orgs/${acme}/members`);
    expect(
      members.json.members.find((m: { account_id: string }) => m.account_id === member).limits,
    ).toMatchObject({
      rate_limit_rpm: 60,
    });
    const audit = await clients.owner.get(`/orgs/${acme}/audit?action=member.limits`);
    const entry = audit.json.entries.find((e: { target: string }) => e.target === member);
    expect(entry).toMatchObject({
      actor_email: 'admin@example.com',
      before: { email: `${member}@example.com`, rate_limit_rpm: 60, budget_usd: 25, budget_period: 'day' },
      after: { email: `${member}@example.com`, rate_limit_rpm: 60, budget_usd: null, budget_period: null },
    });
    for (const [body, field] of [
      [{ budget_usd: 0 }, 'budget_usd'],
      [{ rate_limit_rpm: 1.5 }, 'rate_limit_rpm'],
      [{ budget_period: 'day', budget_usd: null }, 'budget_period'],
    ] as const) {
      const bad = await clients.admin.patch(`/orgs/${acme}/members/${member}/limits`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.json.error.code).toBe('invalid_limits');
      expect(bad.json.error.message).toContain(field);
    }
    expect((await clients.admin.patch(`/orgs/${acme}/members/${member}/limits`, { tpm: 5 })).status).toBe(
      400,
    );
    const unknown = await clients.admin.patch(`/orgs/${acme}/members/nobody/limits`, { rate_limit_rpm: 5 });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('member_not_found');
    // The member reads their own on the Keys page (and none when they have none).
    await clients.admin.patch(`/orgs/${acme}/members/${ids.member}/limits`, {
      budget_usd: 7,
      budget_mode: 'soft',
    });
    const keys = await clients.member.get('/keys', inOrg(acme));
    expect(keys.json.member).toMatchObject({
      limits: { budget_usd: 7, budget_period: 'month', budget_mode: 'soft' },
      budget: { budget_usd: 7 },
    });
    await clients.admin.patch(`/orgs/${acme}/members/${ids.member}/limits`, { budget_usd: null });
    expect((await clients.member.get('/keys', inOrg(acme))).json.member).toBeNull();
  });
});

describe('audit retention', () => {
  it('an owner sets it (1–3650 days or none), audited; the admin reads it', async () => {
    expect((await clients.admin.get(`/orgs/${acme}/audit/retention`)).json).toEqual({ retention_days: null });
    const set = await clients.owner.put(`/orgs/${acme}/audit/retention`, { retention_days: 90 });
    expect(set.json).toEqual({ retention_days: 90 });
    expect((await clients.admin.get(`/orgs/${acme}/audit/retention`)).json).toEqual({ retention_days: 90 });
    for (const bad of [0, 3651, 1.5, '30'])
      expect((await clients.owner.put(`/orgs/${acme}/audit/retention`, { retention_days: bad })).status).toBe(
        400,
      );
    const entry = (await clients.owner.get(`/orgs/${acme}/audit?action=org.audit_retention`)).json.entries[0];
    expect(entry).toMatchObject({ before: { retention_days: null }, after: { retention_days: 90 } });
    expect((await clients.owner.put(`/orgs/${acme}/audit/retention`, { retention_days: null })).json).toEqual(
      {
        retention_days: null,
      },
    );
  });
});

describe('the audit log', () => {
  it('records sign-ins, key and member changes with who, from where and what changed, never a secret', async () => {
    const fresh = s.client();
    expect((await fresh.post('/login', { email: 'member@example.com', password: PASSWORD })).status).toBe(
      200,
    );
    expect(
      (await s.client().post('/login', { email: 'member@example.com', password: 'wrong password!' })).status,
    ).toBe(401);
    const key = await fresh.post('/keys', { name: 'audited' }, inOrg(acme));
    await fresh.patch(`/keys/${key.json.key.id}`, { budget_usd: 5, budget_period: 'day' }, inOrg(acme));
    await clients.admin.post(`/keys/${key.json.key.id}/revoke`, {}, inOrg(acme));

    const all = await clients.owner.get(`/orgs/${acme}/audit?limit=500`);
    expect(all.status).toBe(200);
    const entries = all.json.entries as {
      action: string;
      actor_email: string | null;
      target: string | null;
      ip: string | null;
      user_agent: string | null;
      before: Record<string, unknown> | null;
      after: Record<string, unknown> | null;
    }[];
    const actions = new Set(entries.map((e) => e.action));
    for (const a of [
      'sign_in',
      'sign_in_failed',
      'org.create',
      'member.invite',
      'member.join',
      'member.role',
      'member.remove',
      'key.create',
      'key.limits',
      'key.roll',
      'key.revoke',
      'invite.revoke',
    ])
      expect(actions, a).toContain(a);
    const limits = entries.find((e) => e.action === 'key.limits' && e.target === key.json.key.id)!;
    expect(limits).toMatchObject({ actor_email: 'member@example.com', ip: '127.0.0.1' });
    expect(limits.before).toMatchObject({ name: 'audited', budget_usd: null });
    expect(limits.after).toMatchObject({ name: 'audited', budget_usd: 5, budget_period: 'day' });
    const revoked = entries.find((e) => e.action === 'key.revoke' && e.target === key.json.key.id)!;
    expect(revoked.actor_email).toBe('admin@example.com');
    const failed = entries.find((e) => e.action === 'sign_in_failed')!;
    expect(failed.actor_email).toBeNull();
    // Never a secret: no full key, invitation token, password or hash.
    const text = JSON.stringify(entries);
    expect(text).not.toMatch(/kr_[A-Za-z0-9]{20,}/);
    expect(text).not.toContain(key.json.key.key);
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain('wrong password!');
    expect(text).not.toMatch(/"(token|hash|password|key)":/);

    const onlyRevokes = await clients.owner.get(
      `/orgs/${acme}/audit?action=key.revoke&actor=ADMIN@example.com`,
    );
    expect(onlyRevokes.json.entries.length).toBeGreaterThan(0);
    for (const e of onlyRevokes.json.entries)
      expect(e).toMatchObject({ action: 'key.revoke', actor_email: 'admin@example.com' });
    const page = await clients.owner.get(`/orgs/${acme}/audit?limit=2`);
    const next = await clients.owner.get(`/orgs/${acme}/audit?limit=2&cursor=${page.json.next_cursor}`);
    expect(next.json.entries[0].id < page.json.entries[1].id).toBe(true);

    const exported = await clients.owner.get(`/orgs/${acme}/audit/export`);
    expect(exported.headers['content-type']).toContain('application/x-ndjson');
    const lines = exported.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string });
    expect(lines.map((l) => l.id)).toEqual(entries.map((e) => (e as unknown as { id: string }).id));
    // Another organization's log is not reachable, nor this one's for a member.
    expect((await clients.outsider.get(`/orgs/${acme}/audit`)).status).toBe(404);
    expect((await clients.member.get(`/orgs/${acme}/audit/export`)).status).toBe(403);
  });
});

describe('the sign-up policy', () => {
  it('the install owner makes it stricter in the console, never looser than the configuration', async () => {
    const app = await startConsole();
    const closed = await startConsole({ config: { signup: 'closed' } });
    try {
      const owner = app.client();
      const ownerLogin = await owner.signup('first@example.com');
      const other = app.client();
      await other.signup('second@example.com');
      expect((await owner.get('/settings/signup')).json).toEqual({
        configured: 'open',
        chosen: null,
        effective: 'open',
        can_change: true,
      });
      expect((await other.get('/settings/signup')).json.can_change).toBe(false);
      const refused = await other.post('/settings/signup', { mode: 'open' });
      expect(refused.status).toBe(403);
      expect((await owner.post('/settings/signup', { mode: 'everyone' })).status).toBe(400);

      const set = await owner.post('/settings/signup', { mode: 'invite' });
      expect(set.json).toMatchObject({ chosen: 'invite', effective: 'invite' });
      expect((await app.client().get('/info')).json.signup).toBe('invite');
      const stranger = await app
        .client()
        .post('/signup', { email: 'stranger@example.com', password: PASSWORD });
      expect(stranger.status).toBe(403);
      await owner.post('/settings/signup', { mode: 'open' });
      expect(
        (await app.client().post('/signup', { email: 'stranger@example.com', password: PASSWORD })).status,
      ).toBe(202);

      const log = await owner.get(`/orgs/${ownerLogin.json.account.id}/audit?action=settings.signup`);
      expect(log.json.entries.map((e: { after: { chosen: string } }) => e.after.chosen)).toEqual([
        'open',
        'invite',
      ]);

      // KEYRELAY_SIGNUP=closed: the console cannot open it.
      await closed.configStore.createAccount({ id: 'boss', email: 'boss@example.com', password_hash: 'x' });
      await closed.configStore.ensureSecret('first_account_id', 'boss');
      await closed.configStore.setSetting('signup_policy', 'open');
      expect((await closed.client().get('/info')).json.signup).toBe('closed');
      expect(
        (await closed.client().post('/signup', { email: 'x@example.com', password: PASSWORD })).status,
      ).toBe(403);
    } finally {
      await app.close();
      await closed.close();
    }
  });
});

/** ConfigStore half of the store contract (registered by test/store-contract.test.ts for each backend). */
import { beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { DomainError } from '../../src/errors.js';
import type { AlertRule } from '../../src/store/alert-types.js';
import type { ConfigStore } from '../../src/store/types.js';
import { describeKeyChangeFeedContract } from './key-change-contract.js';

export interface ConfigContext {
  store(): ConfigStore;
  /** A second, independent store on the same database (another instance). */
  openAnother(): Promise<ConfigStore>;
}

const iso = (ms: number) => new Date(ms).toISOString();
const T0 = Date.parse('2026-03-01T10:00:00.000Z');

export function describeConfigStoreContract(ctx: ConfigContext): void {
  let cfg: ConfigStore;
  beforeEach(() => {
    cfg = ctx.store();
  });

  async function newAccount(email = `${newId()}@example.com`) {
    return cfg.createAccount({ id: newId(), email, password_hash: 'scrypt$hash' });
  }

  async function newKey(accountId: string, over: { expires_at?: string | null; name?: string } = {}) {
    const id = newId();
    return cfg.createKey({
      id,
      account_id: accountId,
      name: over.name ?? 'default',
      hash: `hash-${id}`,
      hint: 'kr_ab12…wxyz',
      expires_at: over.expires_at,
    });
  }

  describe('accounts', () => {
    // First test of the contract: the database is still empty here.
    it('hasAccounts is false on a fresh database and true once an account exists', async () => {
      expect(await cfg.hasAccounts()).toBe(false);
      await newAccount();
      expect(await cfg.hasAccounts()).toBe(true);
    });

    it('stores the email lower-cased and finds it whatever the case', async () => {
      const a = await newAccount(`Mixed.${newId()}@Example.COM`);
      expect(a.email).toBe(a.email.toLowerCase());
      expect(Date.parse(a.created_at)).not.toBeNaN();
      const found = await cfg.getAccountByEmail(a.email.toUpperCase());
      expect(found).toMatchObject({
        id: a.id,
        email: a.email,
        password_hash: 'scrypt$hash',
        created_at: a.created_at,
      });
      expect(await cfg.getAccountById(a.id)).toEqual(found);
      expect(await cfg.getAccountByEmail('nobody@example.com')).toBeNull();
      expect(await cfg.getAccountById('missing')).toBeNull();
    });

    it('refuses a second account with the same email in another case as email_taken', async () => {
      const a = await newAccount();
      await expect(
        cfg.createAccount({ id: newId(), email: a.email.toUpperCase(), password_hash: 'x' }),
      ).rejects.toSatisfy((e) => e instanceof DomainError && e.code === 'email_taken');
    });

    it('setPassword replaces the hash and moves password_changed_at', async () => {
      const a = await newAccount();
      const before = (await cfg.getAccountById(a.id))!;
      await new Promise((r) => setTimeout(r, 5));
      await cfg.setPassword(a.id, 'scrypt$new');
      const after = (await cfg.getAccountById(a.id))!;
      expect(after.password_hash).toBe('scrypt$new');
      expect(after.password_changed_at > before.password_changed_at).toBe(true);
    });

    it('keeps bodies as long as the rows until an account sets fewer days, and lists those accounts', async () => {
      const a = await newAccount();
      const b = await newAccount();
      expect(await cfg.getAccountSettings(a.id)).toEqual({ body_retention_days: null });
      expect(await cfg.getAccountSettings('missing')).toEqual({ body_retention_days: null });
      await cfg.setAccountSettings(a.id, { body_retention_days: 7 });
      await cfg.setAccountSettings(b.id, { body_retention_days: 2 });
      expect(await cfg.getAccountSettings(a.id)).toEqual({ body_retention_days: 7 });
      const mine = (await cfg.bodyRetentions()).filter((r) => [a.id, b.id].includes(r.account_id));
      expect(mine.sort((x, y) => x.days - y.days)).toEqual([
        { account_id: b.id, days: 2 },
        { account_id: a.id, days: 7 },
      ]);
      await cfg.setAccountSettings(a.id, { body_retention_days: null });
      expect(await cfg.getAccountSettings(a.id)).toEqual({ body_retention_days: null });
      expect((await cfg.bodyRetentions()).map((r) => r.account_id)).not.toContain(a.id);
    });
  });

  describe('keys', () => {
    it('finds a key by hash and by id, never exposing the hash', async () => {
      const a = await newAccount();
      const k = await newKey(a.id);
      expect(k).toEqual({
        id: k.id,
        name: 'default',
        account_id: a.id,
        org_id: a.id,
        service: false,
        hint: 'kr_ab12…wxyz',
        created_at: k.created_at,
        last_used_at: null,
        expires_at: null,
        revoked_at: null,
        allowed_providers: null,
        allowed_models: null,
        rate_limit_rpm: null,
        budget_usd: null,
        budget_period: null,
        budget_mode: 'soft',
        rate_limit_tpm: null,
        max_concurrent: null,
        rate_limit_scope: 'billable',
        budget_unpriced: 'refuse',
        user_rate_limit_rpm: null,
        user_budget_usd: null,
        user_budget_period: null,
        user_budget_mode: 'soft',
      });
      // The proxy's read carries the limits of the key's member across their keys: none here.
      expect(await cfg.getKeyByHash(`hash-${k.id}`)).toEqual({ ...k, member_limits: null });
      expect(await cfg.getKey(k.id)).toEqual(k);
      expect(await cfg.getKeyByHash('unknown')).toBeNull();
      expect(await cfg.getKey('unknown')).toBeNull();
    });

    it('refuses two keys with the same hash', async () => {
      const a = await newAccount();
      const k = await newKey(a.id);
      await expect(
        cfg.createKey({ id: newId(), account_id: a.id, name: 'n', hash: `hash-${k.id}`, hint: 'h' }),
      ).rejects.toThrow();
    });

    it('lists only the account’s keys, newest first', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const k1 = await newKey(a.id, { name: 'one' });
      await new Promise((r) => setTimeout(r, 3));
      const k2 = await newKey(a.id, { name: 'two' });
      await newKey(b.id);
      expect((await cfg.listKeys(a.id)).map((k) => k.id)).toEqual([k2.id, k1.id]);
      expect(await cfg.listKeys('nobody')).toEqual([]);
    });

    it('renames a key', async () => {
      const a = await newAccount();
      const k = await newKey(a.id);
      await cfg.renameKey(k.id, 'renamed');
      expect((await cfg.getKey(k.id))!.name).toBe('renamed');
    });

    it('revokes once: a second revoke keeps the first time; an unknown key gives null', async () => {
      const a = await newAccount();
      const k = await newKey(a.id);
      const first = await cfg.revokeKey(k.id, iso(T0));
      expect(first!.revoked_at).toBe(iso(T0));
      const second = await cfg.revokeKey(k.id, iso(T0 + 60_000));
      expect(second!.revoked_at).toBe(iso(T0));
      expect(await cfg.revokeKey('unknown', iso(T0))).toBeNull();
    });

    it('stores, changes and clears an expiry', async () => {
      const a = await newAccount();
      const k = await newKey(a.id, { expires_at: '2026-05-01T00:00:00Z' });
      expect(k.expires_at).toBe('2026-05-01T00:00:00.000Z');
      expect((await cfg.getKey(k.id))!.expires_at).toBe('2026-05-01T00:00:00.000Z');
      await cfg.setKeyExpiry(k.id, iso(T0));
      expect((await cfg.getKey(k.id))!.expires_at).toBe(iso(T0));
      await cfg.setKeyExpiry(k.id, null);
      expect((await cfg.getKey(k.id))!.expires_at).toBeNull();
    });

    it('setKeyLimits stores every limit, replaces them whole, clears them with nulls', async () => {
      const a = await newAccount();
      const k = await newKey(a.id);
      const limits = {
        allowed_providers: ['anthropic' as const],
        allowed_models: ['claude-sonnet-5-5', 'gpt-4o*', 'a "quoted", odd {name}'],
        rate_limit_rpm: 120,
        budget_usd: 12.345678,
        budget_period: 'day' as const,
        budget_mode: 'hard' as const,
        rate_limit_tpm: 90_000,
        max_concurrent: 4,
        rate_limit_scope: 'all' as const,
        budget_unpriced: 'allow' as const,
        user_rate_limit_rpm: 30,
        user_budget_usd: 0.75,
        user_budget_period: 'month' as const,
        user_budget_mode: 'soft' as const,
      };
      const set = await cfg.setKeyLimits(k.id, limits);
      expect(set).toEqual({ ...k, ...limits });
      expect(await cfg.getKey(k.id)).toEqual(set);
      expect(await cfg.getKeyByHash(`hash-${k.id}`)).toEqual({ ...set, member_limits: null });
      expect((await cfg.listKeys(a.id))[0]).toEqual(set);
      const replaced = {
        allowed_providers: ['openai' as const, 'anthropic' as const],
        allowed_models: null,
        rate_limit_rpm: null,
        budget_usd: 1_000_000,
        budget_period: 'month' as const,
        budget_mode: 'soft' as const,
        rate_limit_tpm: 1,
        max_concurrent: null,
        rate_limit_scope: 'billable' as const,
        budget_unpriced: 'refuse' as const,
        user_rate_limit_rpm: 7,
        user_budget_usd: 2.5,
        user_budget_period: 'day' as const,
        user_budget_mode: 'hard' as const,
      };
      expect(await cfg.setKeyLimits(k.id, replaced)).toEqual({ ...k, ...replaced });
      const cleared = {
        allowed_providers: null,
        allowed_models: null,
        rate_limit_rpm: null,
        budget_usd: null,
        budget_period: null,
        budget_mode: 'soft' as const,
        rate_limit_tpm: null,
        max_concurrent: null,
        rate_limit_scope: 'billable' as const,
        budget_unpriced: 'refuse' as const,
        user_rate_limit_rpm: null,
        user_budget_usd: null,
        user_budget_period: null,
        user_budget_mode: 'soft' as const,
      };
      expect(await cfg.setKeyLimits(k.id, cleared)).toEqual(k);
      expect(await cfg.getKey(k.id)).toEqual(k);
      expect(await cfg.setKeyLimits('unknown', cleared)).toBeNull();
    });

    it('touchKeys keeps the latest last_used_at (max), ignoring older and unknown ids', async () => {
      const a = await newAccount();
      const k1 = await newKey(a.id);
      const k2 = await newKey(a.id);
      await cfg.touchKeys(new Map());
      await cfg.touchKeys(
        new Map([
          [k1.id, iso(T0 + 2000)],
          [k2.id, iso(T0)],
          ['unknown', iso(T0)],
        ]),
      );
      await cfg.touchKeys(new Map([[k1.id, iso(T0 + 1000)]]));
      expect((await cfg.getKey(k1.id))!.last_used_at).toBe(iso(T0 + 2000));
      await cfg.touchKeys(
        new Map([
          [k1.id, iso(T0 + 3000)],
          [k2.id, iso(T0 + 500)],
        ]),
      );
      expect((await cfg.getKey(k1.id))!.last_used_at).toBe(iso(T0 + 3000));
      expect((await cfg.getKey(k2.id))!.last_used_at).toBe(iso(T0 + 500));
    });
  });

  describe('organizations', () => {
    it('each account owns its personal organization, under its own id', async () => {
      const a = await newAccount();
      expect(await cfg.getOrg(a.id)).toMatchObject({ id: a.id, name: a.email, personal_of: a.id });
      expect(await cfg.getRole(a.id, a.id)).toBe('owner');
      expect((await cfg.listOrgsOf(a.id)).map((o) => [o.id, o.role])).toEqual([[a.id, 'owner']]);
      // A failed account creation leaves no organization behind.
      await expect(
        cfg.createAccount({ id: 'dup-org', email: a.email, password_hash: 'x' }),
      ).rejects.toThrow();
      expect(await cfg.getOrg('dup-org')).toBeNull();
    });

    it('creates, renames, lists members by role; keys by organization and holder; transfers', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const org = await cfg.createOrg({ id: newId(), name: 'Team', owner_id: a.id });
      expect(org).toMatchObject({ name: 'Team', personal_of: null });
      await cfg.renameOrg(org.id, 'Team 2');
      expect((await cfg.getOrg(org.id))?.name).toBe('Team 2');
      await cfg.setMember(org.id, b.id, 'viewer');
      await cfg.setMember(org.id, b.id, 'member');
      expect((await cfg.listMembers(org.id)).map((m) => [m.account_id, m.email, m.role])).toEqual([
        [a.id, a.email, 'owner'],
        [b.id, b.email, 'member'],
      ]);
      expect((await cfg.listOrgsOf(b.id)).map((o) => o.id)).toEqual([b.id, org.id]);
      const inOrg = await cfg.createKey({
        id: newId(),
        account_id: b.id,
        org_id: org.id,
        name: 'k',
        hash: `h-${newId()}`,
        hint: 'kr_…',
      });
      expect(inOrg.org_id).toBe(org.id);
      const personal = await newKey(b.id);
      expect((await cfg.listOrgKeys(org.id)).map((k) => k.id)).toEqual([inOrg.id]);
      expect((await cfg.listOrgKeys(b.id, b.id)).map((k) => k.id)).toEqual([personal.id]);
      expect(await cfg.transferKeys(org.id, b.id, a.id)).toEqual([inOrg.id]);
      expect((await cfg.getKey(inOrg.id))?.account_id).toBe(a.id);
      expect((await cfg.getKey(personal.id))?.account_id).toBe(b.id);
      await cfg.removeMember(org.id, b.id);
      expect(await cfg.getRole(org.id, b.id)).toBeNull();
    });

    it('invitations: listed while usable, claimed by exactly one caller', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const c = await newAccount();
      const hash = `inv-${newId()}`;
      const inv = await cfg.createInvite({
        id: newId(),
        org_id: a.id,
        token_hash: hash,
        role: 'admin',
        created_by: a.id,
        expires_at: iso(T0 + 1000),
      });
      expect(await cfg.listInvites(a.id, iso(T0))).toEqual([inv]);
      expect(await cfg.listInvites(a.id, iso(T0 + 1000))).toEqual([]);
      expect(await cfg.claimInvite(hash, b.id, iso(T0 + 1000))).toBeNull(); // expired
      const claims = await Promise.all([
        cfg.claimInvite(hash, b.id, iso(T0)),
        cfg.claimInvite(hash, c.id, iso(T0)),
      ]);
      expect(claims.filter((x) => x !== null)).toHaveLength(1);
      expect(await cfg.getInviteByHash(hash)).toMatchObject({ used_at: iso(T0) });
      const other = await cfg.createInvite({
        id: newId(),
        org_id: a.id,
        token_hash: `inv-${newId()}`,
        role: 'member',
        created_by: a.id,
        expires_at: iso(T0 + 1000),
      });
      expect(await cfg.deleteInvite(b.id, other.id)).toBe(false);
      expect(await cfg.deleteInvite(a.id, other.id)).toBe(true);
    });

    it('audit entries come back newest first, filtered, a page at a time', async () => {
      const a = await newAccount();
      const entry = (i: number, action: string) => ({
        id: newId(T0 + i),
        org_id: a.id,
        at: iso(T0 + i),
        actor_id: a.id,
        actor_email: a.email,
        action,
        target: null,
        ip: '127.0.0.1',
        user_agent: null,
        before: null,
        after: { n: i, nested: { ok: true } },
      });
      const written = Array.from({ length: 5 }, (_, i) => entry(i, i % 2 ? 'key.create' : 'sign_in'));
      for (const e of written) await cfg.appendAudit(e);
      const all = await cfg.listAudit({ org_id: a.id, limit: 10 });
      expect(all.map((e) => e.after?.n)).toEqual([4, 3, 2, 1, 0]);
      expect(all[0]).toEqual(written[4]);
      expect(
        (await cfg.listAudit({ org_id: a.id, action: 'key.create', limit: 10 })).map((e) => e.after?.n),
      ).toEqual([3, 1]);
      expect(
        (await cfg.listAudit({ org_id: a.id, before_id: all[1]!.id, limit: 2 })).map((e) => e.after?.n),
      ).toEqual([2, 1]);
      expect(
        (await cfg.listAudit({ org_id: a.id, from: iso(T0 + 1), to: iso(T0 + 3), limit: 10 })).map(
          (e) => e.after?.n,
        ),
      ).toEqual([2, 1]);
      expect(await cfg.listAudit({ org_id: a.id, actor_email: 'nobody@example.com', limit: 10 })).toEqual([]);
    });

    it('member limits: stored, listed, read with each of the member’s keys (not a service key), fed as key changes', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const org = await cfg.createOrg({ id: newId(), name: 'Lim', owner_id: a.id });
      await cfg.setMember(org.id, b.id, 'member');
      const make = (account: string, service = false) => {
        const id = newId();
        return cfg.createKey({
          id,
          account_id: account,
          org_id: org.id,
          service,
          name: 'k',
          hash: `h-${id}`,
          hint: 'kr_…',
        });
      };
      const proxyRead = async (id: string) => (await cfg.getKeyByHash(`h-${id}`))?.member_limits;
      const k1 = await make(b.id);
      const k2 = await make(b.id);
      const svc = await make(b.id, true);
      const none = { rate_limit_rpm: null, budget_usd: null, budget_period: null, budget_mode: 'soft' };
      expect(await cfg.getMemberLimits(org.id, b.id)).toEqual(none);
      expect(await cfg.getMemberLimits(org.id, 'nobody')).toBeNull();
      const head = (await cfg.keyChangesSince(0)).seq;
      const limits = {
        rate_limit_rpm: 30,
        budget_usd: 12.5,
        budget_period: 'day',
        budget_mode: 'hard',
      } as const;
      expect(await cfg.setMemberLimits(org.id, b.id, limits)).toEqual(limits);
      expect(await cfg.setMemberLimits(org.id, 'nobody', limits)).toBeNull();
      expect(await cfg.getMemberLimits(org.id, b.id)).toEqual(limits);
      expect((await cfg.listMembers(org.id)).map((m) => [m.account_id, m.limits])).toEqual([
        [a.id, none],
        [b.id, limits],
      ]);
      // Each of the member's keys is entered in the change feed, so every instance reloads them.
      const fed = await cfg.keyChangesSince(head);
      expect([...new Set(fed.keyIds)].sort()).toEqual([k1.id, k2.id].sort());
      expect(await proxyRead(k1.id)).toEqual(limits);
      expect(await proxyRead(k2.id)).toEqual(limits);
      // A service key is no member's; a key of the account's personal organization is held to that one's.
      expect(await proxyRead(svc.id)).toBeNull();
      const personal = await newKey(b.id);
      expect(await cfg.getKeyByHash(`hash-${personal.id}`)).toMatchObject({ member_limits: null });
      expect(await cfg.getMemberLimits(b.id, b.id)).toEqual(none);
      // Other reads leave it out.
      expect(await cfg.getKey(k1.id)).not.toHaveProperty('member_limits');
      // Cleared with nulls; the mode is kept.
      const cleared = { ...none, budget_mode: 'hard' } as const;
      expect(await cfg.setMemberLimits(org.id, b.id, cleared)).toEqual(cleared);
      expect(await proxyRead(k1.id)).toBeNull();
      // Removing a member with limits feeds their keys too; their limits go with the membership.
      await cfg.setMemberLimits(org.id, b.id, limits);
      const before = (await cfg.keyChangesSince(0)).seq;
      await cfg.removeMember(org.id, b.id);
      expect([...new Set((await cfg.keyChangesSince(before)).keyIds)].sort()).toEqual([k1.id, k2.id].sort());
      expect(await cfg.getMemberLimits(org.id, b.id)).toBeNull();
      expect(await proxyRead(k1.id)).toBeNull();
    });

    it('service keys: the organization lists them, no member holds them, a transfer leaves them', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const org = await cfg.createOrg({ id: newId(), name: 'Svc', owner_id: a.id });
      await cfg.setMember(org.id, b.id, 'member');
      const make = (service: boolean) =>
        cfg.createKey({
          id: newId(),
          account_id: a.id,
          org_id: org.id,
          service,
          name: service ? 'ci' : 'mine',
          hash: `h-${newId()}`,
          hint: 'kr_…',
        });
      const svc = await make(true);
      const held = await make(false);
      expect(svc).toMatchObject({ service: true, account_id: a.id, org_id: org.id });
      expect(held.service).toBe(false);
      expect(await cfg.getKey(svc.id)).toEqual(svc);
      expect((await cfg.listOrgKeys(org.id)).map((k) => [k.id, k.service]).sort()).toEqual(
        [
          [svc.id, true],
          [held.id, false],
        ].sort(),
      );
      expect((await cfg.listOrgKeys(org.id, a.id)).map((k) => k.id)).toEqual([held.id]);
      expect(await cfg.transferKeys(org.id, a.id, b.id)).toEqual([held.id]);
      expect((await cfg.getKey(svc.id))?.account_id).toBe(a.id);
      expect((await cfg.getKey(held.id))?.account_id).toBe(b.id);
      // A key made without saying is a member's.
      expect((await newKey(a.id)).service).toBe(false);
    });

    it('audit retention: per organization, none by default; pruning takes only what is past it', async () => {
      const a = await newAccount();
      const b = await newAccount();
      expect(await cfg.getAuditRetention(a.id)).toBeNull();
      expect(await cfg.getAuditRetention('no-such-org')).toBeNull();
      await cfg.setAuditRetention(a.id, 30);
      expect(await cfg.getAuditRetention(a.id)).toBe(30);
      expect(await cfg.getAuditRetention(b.id)).toBeNull();
      const now = Date.now();
      const entry = (org: string, daysAgo: number) => ({
        id: newId(now - daysAgo * 86_400_000),
        org_id: org,
        at: iso(now - daysAgo * 86_400_000),
        actor_id: null,
        actor_email: null,
        action: 'sign_in_failed',
        target: null,
        ip: null,
        user_agent: null,
        before: null,
        after: { days: daysAgo },
      });
      for (const e of [entry(a.id, 31), entry(a.id, 29), entry(b.id, 31)]) await cfg.appendAudit(e);
      expect(await cfg.pruneAudit()).toBe(1);
      const days = async (org: string) =>
        (await cfg.listAudit({ org_id: org, limit: 10 })).map((e) => e.after?.days);
      expect(await days(a.id)).toEqual([29]);
      expect(await days(b.id)).toEqual([31]);
      expect(await cfg.pruneAudit()).toBe(0);
      await cfg.setAuditRetention(a.id, null);
      expect(await cfg.getAuditRetention(a.id)).toBeNull();
    });
  });

  describe('single sign-on', () => {
    const conn = (orgId: string, domains: string[]) => ({
      org_id: orgId,
      issuer: 'https://idp.example.com',
      client_id: 'keyrelay',
      client_secret: 'the secret',
      domains,
      default_role: 'member' as const,
      sso_only: false,
    });

    it('stores a connection with its domains, replaces it whole, finds it by domain, deletes it', async () => {
      const a = await newAccount();
      const org = await cfg.createOrg({ id: newId(), name: 'SSO', owner_id: a.id });
      const d1 = `one-${newId()}.example`.toLowerCase();
      const d2 = `two-${newId()}.example`.toLowerCase();
      expect(await cfg.getSsoConnection(org.id)).toBeNull();
      const put = await cfg.putSsoConnection(conn(org.id, [d2, d1, d1]));
      expect(put).toMatchObject({ ...conn(org.id, [d1, d2].sort()), updated_at: expect.any(String) });
      expect(await cfg.getSsoConnection(org.id)).toEqual(put);
      expect((await cfg.findSsoConnectionByDomain(d2))?.org_id).toBe(org.id);
      const changed = await cfg.putSsoConnection({
        ...conn(org.id, [d1]),
        client_secret: 'new secret',
        default_role: 'viewer',
        sso_only: true,
      });
      expect(changed).toMatchObject({ client_secret: 'new secret', default_role: 'viewer', sso_only: true });
      expect(changed.domains).toEqual([d1]);
      expect(await cfg.findSsoConnectionByDomain(d2)).toBeNull();
      expect(await cfg.deleteSsoConnection(org.id)).toBe(true);
      expect(await cfg.deleteSsoConnection(org.id)).toBe(false);
      expect(await cfg.findSsoConnectionByDomain(d1)).toBeNull();
    });

    it("refuses another organization's domain as sso_domain_taken and keeps both connections as they were", async () => {
      const a = await newAccount();
      const one = await cfg.createOrg({ id: newId(), name: 'One', owner_id: a.id });
      const two = await cfg.createOrg({ id: newId(), name: 'Two', owner_id: a.id });
      const shared = `shared-${newId()}.example`.toLowerCase();
      const own = `own-${newId()}.example`.toLowerCase();
      await cfg.putSsoConnection(conn(one.id, [shared]));
      await cfg.putSsoConnection(conn(two.id, [own]));
      await expect(cfg.putSsoConnection(conn(two.id, [own, shared]))).rejects.toMatchObject({
        code: 'sso_domain_taken',
      });
      expect((await cfg.getSsoConnection(two.id))?.domains).toEqual([own]);
      expect((await cfg.findSsoConnectionByDomain(shared))?.org_id).toBe(one.id);
    });

    it('flows: taken once, never after expiry, expired ones swept', async () => {
      const a = await newAccount();
      const flow = (id: string, expires: number) => ({
        id_hash: id,
        org_id: a.id,
        state: 's',
        nonce: 'n',
        code_verifier: 'v',
        expires_at: iso(expires),
      });
      const now = Date.now();
      const live = `live-${newId()}`;
      const stale = `stale-${newId()}`;
      await cfg.createSsoFlow(flow(live, now + 60_000));
      await cfg.createSsoFlow(flow(stale, now + 60_000));
      const takes = await Promise.all([cfg.takeSsoFlow(live, iso(now)), cfg.takeSsoFlow(live, iso(now))]);
      expect(takes.filter((t) => t !== null)).toEqual([flow(live, now + 60_000)]);
      expect(await cfg.takeSsoFlow(stale, iso(now + 60_000))).toBeNull();
      expect(await cfg.takeSsoFlow(stale, iso(now))).toBeNull(); // taking removed it
      await cfg.createSsoFlow(flow(stale, now - 1));
      await cfg.createSsoFlow(flow(`other-${newId()}`, now + 60_000)); // sweeps the expired one
      expect(await cfg.takeSsoFlow(stale, iso(now - 1000))).toBeNull();
    });
  });

  describe('secrets', () => {
    it('ensureSecret: the first writer wins, also across concurrent instances', async () => {
      const other = await ctx.openAnother();
      const name = `fp-${newId()}`;
      const results = await Promise.all([
        cfg.ensureSecret(name, 'candidate-a'),
        other.ensureSecret(name, 'candidate-b'),
        cfg.ensureSecret(name, 'candidate-c'),
        other.ensureSecret(name, 'candidate-d'),
      ]);
      expect(new Set(results).size).toBe(1);
      expect(['candidate-a', 'candidate-b', 'candidate-c', 'candidate-d']).toContain(results[0]);
      expect(await cfg.ensureSecret(name, 'later')).toBe(results[0]);
    });

    it('takeSecrets: returns and removes the entries under a prefix, and only those', async () => {
      const base = `note_${newId()}:`;
      await cfg.ensureSecret(`${base}1`, 'one');
      await cfg.ensureSecret(`${base}2`, 'two');
      await cfg.ensureSecret(`${base.slice(0, -1)}X1`, 'not under the prefix');
      expect(await cfg.takeSecrets(base)).toEqual([
        { name: `${base}1`, value: 'one' },
        { name: `${base}2`, value: 'two' },
      ]);
      expect(await cfg.takeSecrets(base)).toEqual([]);
      expect(await cfg.ensureSecret(`${base.slice(0, -1)}X1`, 'other')).toBe('not under the prefix');
    });
  });

  describe('alerts', () => {
    const rule = (orgId: string, over: Partial<AlertRule> = {}): AlertRule => ({
      id: newId(),
      org_id: orgId,
      name: 'budget 80%',
      scope: 'org',
      scope_id: null,
      kind: 'budget',
      params: { budget_usd: 10, period: 'month', thresholds: [50, 80, 100] },
      url: 'https://hooks.example.com/keyrelay',
      format: 'json',
      secret: 'whsec_test',
      enabled: true,
      created_at: iso(T0),
      created_by: orgId,
      ...over,
    });

    it('stores rules per organization, lists enabled ones across organizations, toggles and deletes', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const r1 = rule(a.id);
      const r2 = rule(a.id, {
        kind: 'error_rate',
        scope: 'key',
        scope_id: 'key-1',
        params: { window_minutes: 5, threshold_percent: 20, min_requests: 10 },
        format: 'slack',
        created_at: iso(T0 + 1000),
      });
      const r3 = rule(b.id, { enabled: false });
      for (const r of [r1, r2, r3]) await cfg.createAlertRule(r);
      expect(await cfg.listAlertRules(a.id)).toEqual([r1, r2]);
      expect(await cfg.listAlertRules(b.id)).toEqual([r3]);
      const enabled = (await cfg.listEnabledAlertRules()).map((r) => r.id);
      expect(enabled).toEqual(expect.arrayContaining([r1.id, r2.id]));
      expect(enabled).not.toContain(r3.id);
      expect(await cfg.setAlertRuleEnabled(a.id, r1.id, false)).toEqual({ ...r1, enabled: false });
      expect(await cfg.setAlertRuleEnabled(b.id, r1.id, true)).toBeNull(); // another organization's
      expect((await cfg.listEnabledAlertRules()).map((r) => r.id)).not.toContain(r1.id);
      expect(await cfg.deleteAlertRule(b.id, r2.id)).toBe(false);
      expect(await cfg.deleteAlertRule(a.id, r2.id)).toBe(true);
      expect(await cfg.listAlertRules(a.id)).toEqual([{ ...r1, enabled: false }]);
    });

    it('claims a delivery once per rule and occasion, across two stores on one database', async () => {
      const a = await newAccount();
      const r = rule(a.id);
      await cfg.createAlertRule(r);
      const other = await ctx.openAnother();
      try {
        const claim = (store: ConfigStore) =>
          store.claimAlertDelivery({
            id: newId(),
            rule_id: r.id,
            org_id: a.id,
            dedupe_key: 'budget:2026-03-01:80',
            payload: '{"x":1}',
            created_at: iso(T0),
            lease_until: iso(T0 + 60_000),
          });
        const won = await Promise.all([claim(cfg), claim(other), claim(cfg), claim(other)]);
        expect(won.filter(Boolean)).toHaveLength(1);
      } finally {
        await other.close();
      }
      const [d] = await cfg.listAlertDeliveries(a.id, 10);
      expect(d).toMatchObject({ state: 'pending', attempts: 0, payload: '{"x":1}', error: null });
      await cfg.updateAlertDelivery(d!.id, {
        state: 'failed',
        attempts: 3,
        response_status: 500,
        error: 'answered 500',
        updated_at: iso(T0 + 5000),
        lease_until: null,
      });
      expect(await cfg.listAlertDeliveries(a.id, 10)).toEqual([
        {
          ...d,
          state: 'failed',
          attempts: 3,
          response_status: 500,
          error: 'answered 500',
          updated_at: iso(T0 + 5000),
        },
      ]);
      expect(await cfg.listAlertDeliveries(newId(), 10)).toEqual([]);
      // Deleting the rule takes its deliveries with it.
      await cfg.deleteAlertRule(a.id, r.id);
      expect(await cfg.listAlertDeliveries(a.id, 10)).toEqual([]);
    });

    it('hands a pending delivery whose lease ran out to one taker, across two stores on one database', async () => {
      const a = await newAccount();
      const r = rule(a.id);
      await cfg.createAlertRule(r);
      const claim = async (key: string, lease: number) => {
        const id = newId();
        const d = { id, rule_id: r.id, org_id: a.id, dedupe_key: key, payload: key, created_at: iso(T0) };
        expect(await cfg.claimAlertDelivery({ ...d, lease_until: iso(lease) })).toBe(true);
        return id;
      };
      const lapsed = await claim('lapsed', T0 + 1_000);
      await claim('held', T0 + 60_000);
      const settled = await claim('settled', T0 + 1_000);
      await cfg.updateAlertDelivery(settled, {
        state: 'delivered',
        attempts: 1,
        response_status: 200,
        error: null,
        updated_at: iso(T0 + 500),
        lease_until: null,
      });
      const other = await ctx.openAnother();
      try {
        const now = iso(T0 + 30_000);
        const taken = await Promise.all([
          cfg.takeOverAlertDeliveries(now, iso(T0 + 90_000), 10),
          other.takeOverAlertDeliveries(now, iso(T0 + 90_000), 10),
        ]);
        expect(taken.flat().map((d) => d.id)).toEqual([lapsed]);
        expect(taken.flat()[0]).toMatchObject({ state: 'pending', attempts: 0, payload: 'lapsed' });
        // Taken, its lease is the taker's now: nobody takes it again before that runs out.
        expect(await other.takeOverAlertDeliveries(iso(T0 + 59_000), iso(T0 + 200_000), 10)).toEqual([]);
        // Past both leases, oldest first, at most `limit`.
        const next = await cfg.takeOverAlertDeliveries(iso(T0 + 95_000), iso(T0 + 200_000), 1);
        expect(next.map((d) => d.payload)).toEqual(['held']);
      } finally {
        await other.close();
      }
    });
  });

  describe('credential labels', () => {
    it("sets, renames and removes an account's label for a fingerprint; other accounts see none", async () => {
      const a = await newAccount();
      const b = await newAccount();
      expect(await cfg.listCredentialLabels(a.id)).toEqual([]);
      await cfg.setCredentialLabel(a.id, 'fp-2', 'staging key');
      await cfg.setCredentialLabel(a.id, 'fp-1', 'prod OpenAI key');
      await cfg.setCredentialLabel(a.id, 'fp-1', 'prod OpenAI key (rotated)');
      await cfg.setCredentialLabel(b.id, 'fp-1', "b's name");
      const labels = await cfg.listCredentialLabels(a.id);
      expect(labels.map((l) => [l.fingerprint, l.label])).toEqual([
        ['fp-1', 'prod OpenAI key (rotated)'],
        ['fp-2', 'staging key'],
      ]);
      expect(Number.isNaN(Date.parse(labels[0]!.updated_at))).toBe(false);
      await cfg.setCredentialLabel(a.id, 'fp-2', null);
      expect((await cfg.listCredentialLabels(a.id)).map((l) => l.fingerprint)).toEqual(['fp-1']);
      expect((await cfg.listCredentialLabels(b.id)).map((l) => l.label)).toEqual(["b's name"]);
    });
  });

  describe('provider key links', () => {
    it("ties a provider's API key id to a fingerprint, moves and removes it; ids are per provider", async () => {
      const before = await cfg.listProviderKeyLinks();
      const id = `key_${newId()}`;
      await cfg.setProviderKeyLink('openai', id, 'a'.repeat(32));
      await cfg.setProviderKeyLink('anthropic', id, 'b'.repeat(32));
      await cfg.setProviderKeyLink('openai', id, 'c'.repeat(32));
      const mine = (await cfg.listProviderKeyLinks()).filter((l) => l.api_key_id === id);
      expect(mine.map((l) => [l.provider, l.fingerprint])).toEqual([
        ['anthropic', 'b'.repeat(32)],
        ['openai', 'c'.repeat(32)],
      ]);
      expect(Number.isNaN(Date.parse(mine[0]!.created_at))).toBe(false);
      await cfg.setProviderKeyLink('openai', id, null);
      await cfg.setProviderKeyLink('anthropic', id, null);
      expect(await cfg.listProviderKeyLinks()).toEqual(before);
    });
  });

  describe('api tokens', () => {
    it('creates, finds by hash, lists newest first and revokes an account’s tokens only', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const base = { account_id: a.id, hint: 'krt_abcd…wxyz', scopes: ['usage' as const, 'export' as const] };
      const t1 = {
        ...base,
        id: newId(),
        name: 'first',
        created_at: '2026-03-01T10:00:00.000Z',
        hash: `h-${newId()}`,
      };
      const t2 = {
        ...base,
        id: newId(),
        name: 'second',
        created_at: '2026-03-01T11:00:00.000Z',
        hash: `h-${newId()}`,
      };
      await cfg.createApiToken(t1);
      await cfg.createApiToken(t2);
      expect((await cfg.listApiTokens(a.id)).map((t) => t.name)).toEqual(['second', 'first']);
      const { hash: _h, ...view } = t1;
      expect(await cfg.getApiTokenByHash(t1.hash)).toEqual({ ...view, revoked_at: null });
      expect(await cfg.getApiTokenByHash('nope')).toBeNull();
      expect(await cfg.revokeApiToken(b.id, t1.id, '2026-03-02T00:00:00.000Z')).toBe(false);
      expect((await cfg.getApiTokenByHash(t1.hash))!.revoked_at).toBeNull();
      expect(await cfg.revokeApiToken(a.id, t1.id, '2026-03-02T00:00:00.000Z')).toBe(true);
      expect(await cfg.revokeApiToken(a.id, t1.id, '2026-03-03T00:00:00.000Z')).toBe(true);
      expect((await cfg.getApiTokenByHash(t1.hash))!.revoked_at).toBe('2026-03-02T00:00:00.000Z');
      expect(await cfg.listApiTokens(b.id)).toEqual([]);
    });
  });

  describe('sessions', () => {
    it('creates, reads, touches and deletes a session', async () => {
      const a = await newAccount();
      const s = {
        id_hash: `s-${newId()}`,
        account_id: a.id,
        created_at: iso(T0),
        last_seen_at: iso(T0),
        expires_at: iso(T0 + 86_400_000),
        via: 'sso' as const,
      };
      await cfg.createSession(s);
      expect(await cfg.getSession(s.id_hash)).toEqual(s);
      await cfg.touchSession(s.id_hash, iso(T0 + 60_000));
      expect(await cfg.getSession(s.id_hash)).toEqual({ ...s, last_seen_at: iso(T0 + 60_000) });
      await cfg.deleteSession(s.id_hash);
      expect(await cfg.getSession(s.id_hash)).toBeNull();
      expect(await cfg.getSession('unknown')).toBeNull();
    });

    it('deleteSessionsForAccount ends every session of that account only', async () => {
      const a = await newAccount();
      const b = await newAccount();
      const mk = (accountId: string) => ({
        id_hash: `s-${newId()}`,
        account_id: accountId,
        created_at: iso(T0),
        last_seen_at: iso(T0),
        expires_at: iso(T0 + 1000),
        via: 'password' as const,
      });
      const [a1, a2, b1] = [mk(a.id), mk(a.id), mk(b.id)];
      for (const s of [a1, a2, b1]) await cfg.createSession(s);
      await cfg.deleteSessionsForAccount(a.id);
      expect(await cfg.getSession(a1.id_hash)).toBeNull();
      expect(await cfg.getSession(a2.id_hash)).toBeNull();
      expect(await cfg.getSession(b1.id_hash)).toEqual(b1);
    });
  });

  describeKeyChangeFeedContract(ctx);
}

/** ConfigStore half of the store contract (registered by test/store-contract.test.ts for each backend). */
import { beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { EmailTakenError } from '../../src/store/errors.js';
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
      ).rejects.toBeInstanceOf(EmailTakenError);
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
  });

  describe('keys', () => {
    it('finds a key by hash and by id, never exposing the hash', async () => {
      const a = await newAccount();
      const k = await newKey(a.id);
      expect(k).toEqual({
        id: k.id,
        name: 'default',
        account_id: a.id,
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
      });
      expect(await cfg.getKeyByHash(`hash-${k.id}`)).toEqual(k);
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
      };
      const set = await cfg.setKeyLimits(k.id, limits);
      expect(set).toEqual({ ...k, ...limits });
      expect(await cfg.getKey(k.id)).toEqual(set);
      expect(await cfg.getKeyByHash(`hash-${k.id}`)).toEqual(set);
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

  describe('sessions', () => {
    it('creates, reads, touches and deletes a session', async () => {
      const a = await newAccount();
      const s = {
        id_hash: `s-${newId()}`,
        account_id: a.id,
        created_at: iso(T0),
        last_seen_at: iso(T0),
        expires_at: iso(T0 + 86_400_000),
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

/** The key change feed half of the ConfigStore contract (registered by describeConfigStoreContract). */
import { beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import type { ConfigStore, KeyRecord } from '../../src/store/types.js';
import type { ConfigContext } from './config-contract.js';

const NO_LIMITS = {
  allowed_providers: null,
  allowed_models: null,
  rate_limit_rpm: null,
  budget_usd: null,
  budget_period: null,
  budget_mode: 'soft' as const,
  rate_limit_tpm: null,
  max_concurrent: null,
  rate_limit_scope: 'billable' as const,
  budget_unpriced: 'refuse' as 'refuse' | 'allow',
  user_rate_limit_rpm: null as number | null,
  user_budget_usd: null,
  user_budget_period: null,
  user_budget_mode: 'soft' as 'soft' | 'hard',
};

export function describeKeyChangeFeedContract(ctx: ConfigContext): void {
  let cfg: ConfigStore;
  beforeEach(() => {
    cfg = ctx.store();
  });

  async function newKey(): Promise<KeyRecord> {
    const a = await cfg.createAccount({ id: newId(), email: `${newId()}@example.com`, password_hash: 'x' });
    const id = newId();
    return cfg.createKey({ id, account_id: a.id, name: 'k', hash: `hash-${id}`, hint: 'kr_ab12…wxyz' });
  }

  /** Every key id in the feed after `seq`, in order (one entry per page's distinct ids), and the final seq. */
  async function readAll(store: ConfigStore, seq: number): Promise<{ seq: number; keyIds: string[] }> {
    const keyIds: string[] = [];
    for (;;) {
      const page = await store.keyChangesSince(seq);
      if (page.seq === seq) return { seq, keyIds };
      expect(page.seq).toBeGreaterThan(seq);
      keyIds.push(...page.keyIds);
      seq = page.seq;
    }
  }

  describe('key change feed', () => {
    it('records revoke, expiry, rename and limits changes, each moving the head forward', async () => {
      const k = await newKey();
      let seq = await cfg.keyChangeHead();
      const changes: (() => Promise<unknown>)[] = [
        () => cfg.revokeKey(k.id, new Date().toISOString()),
        () => cfg.setKeyExpiry(k.id, new Date(Date.now() + 60_000).toISOString()),
        () => cfg.renameKey(k.id, 'renamed'),
        () => cfg.setKeyLimits(k.id, { ...NO_LIMITS, rate_limit_rpm: 5 }),
        () => cfg.setKeyLimits(k.id, { ...NO_LIMITS, rate_limit_rpm: 5, budget_unpriced: 'allow' }),
        () => cfg.setKeyLimits(k.id, { ...NO_LIMITS, rate_limit_rpm: 5, user_rate_limit_rpm: 2 }),
        () => cfg.setKeyLimits(k.id, { ...NO_LIMITS, rate_limit_rpm: 5, user_budget_mode: 'hard' }),
      ];
      for (const change of changes) {
        await change();
        const page = await cfg.keyChangesSince(seq);
        expect(page.keyIds).toEqual([k.id]);
        expect(page.seq).toBeGreaterThan(seq);
        expect(await cfg.keyChangeHead()).toBe(page.seq);
        seq = page.seq;
      }
      expect(await cfg.keyChangesSince(seq)).toEqual({ seq, keyIds: [] });
    });

    it('records nothing for touchKeys, a repeated revoke or an unknown key', async () => {
      const k = await newKey();
      await cfg.revokeKey(k.id, new Date().toISOString());
      const head = await cfg.keyChangeHead();
      await cfg.touchKeys(new Map([[k.id, new Date().toISOString()]]));
      await cfg.revokeKey(k.id, new Date().toISOString());
      await cfg.revokeKey('unknown', new Date().toISOString());
      await cfg.renameKey('unknown', 'x');
      expect(await cfg.keyChangesSince(head)).toEqual({ seq: head, keyIds: [] });
    });

    it('shows one instance’s changes to another, from the head it read before', async () => {
      const other = await ctx.openAnother();
      const [k1, k2] = [await newKey(), await newKey()];
      const head = await other.keyChangeHead();
      await cfg.revokeKey(k1.id, new Date().toISOString());
      await cfg.renameKey(k2.id, 'b');
      await cfg.renameKey(k1.id, 'a');
      const page = await other.keyChangesSince(head);
      expect(page.keyIds).toEqual([k1.id, k2.id]);
      expect(page.seq).toBe(await cfg.keyChangeHead());
    });

    it('misses no change made by concurrent writers while a reader follows the feed', async () => {
      const other = await ctx.openAnother();
      const keys: KeyRecord[] = [];
      for (let i = 0; i < 200; i++) keys.push(await newKey());
      let seq = await cfg.keyChangeHead();
      const seen = new Set<string>();
      let writing = true;
      const reader = (async () => {
        while (writing) {
          const page = await other.keyChangesSince(seq);
          for (const id of page.keyIds) seen.add(id);
          seq = page.seq;
        }
      })();
      await Promise.all(keys.map((k, i) => (i % 2 ? cfg : other).renameKey(k.id, `concurrent ${i}`))).finally(
        () => (writing = false),
      );
      await reader;
      const rest = await readAll(other, seq);
      for (const id of rest.keyIds) seen.add(id);
      expect(seen.size).toBe(keys.length);
    });

    it('pages a long backlog: asking again from the returned seq reaches every change', async () => {
      const keys = [await newKey(), await newKey(), await newKey()];
      const head = await cfg.keyChangeHead();
      for (let i = 0; i < 1_100; i++) await cfg.renameKey(keys[i % 3]!.id, `n${i}`);
      const first = await cfg.keyChangesSince(head);
      expect(first.seq).toBeLessThan(await cfg.keyChangeHead());
      const all = await readAll(cfg, head);
      expect(all.seq).toBe(await cfg.keyChangeHead());
      expect(new Set(all.keyIds)).toEqual(new Set(keys.map((k) => k.id)));
    });
  });
}

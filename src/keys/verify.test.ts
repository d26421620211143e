import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../store/types.js';
import { LocalKeyEventBus } from './events.js';
import { generateKey, hashKey } from './format.js';
import { KeyVerifier, type KeyCheck } from './verify.js';

const refusal = (r: KeyCheck) => (r.ok ? null : r.error);

/** A tiny real store of keys by hash, counting lookups (the verifier only ever calls getKeyByHash). */
function storeWith(keys: Map<string, KeyRecord>) {
  const store = {
    lookups: 0,
    getKeyByHash(hash: string) {
      store.lookups++;
      return Promise.resolve(keys.get(hash) ?? null);
    },
  };
  return store;
}

const record = (over: Partial<KeyRecord> = {}): KeyRecord => ({
  id: 'k1',
  name: 'default',
  account_id: 'a1',
  org_id: 'a1',
  service: false,
  hint: 'kr_…',
  created_at: new Date().toISOString(),
  last_used_at: null,
  expires_at: null,
  revoked_at: null,
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
  ...over,
});

describe('KeyVerifier', () => {
  it('refuses garbage by format with no lookup at all', async () => {
    const store = storeWith(new Map());
    const v = new KeyVerifier(store, 60_000);
    expect(refusal(await v.check(undefined))?.code).toBe('proxy_key_missing');
    expect(refusal(await v.check('kr_nope'))?.code).toBe('proxy_key_invalid');
    const k = generateKey();
    expect(refusal(await v.check(k.slice(0, -1) + (k.endsWith('a') ? 'b' : 'a')))?.code).toBe(
      'proxy_key_invalid',
    );
    expect(store.lookups).toBe(0);
  });

  it('does no lookup in the steady state, and one per key after the TTL', async () => {
    const k = generateKey();
    let now = 0;
    const store = storeWith(new Map([[hashKey(k), record()]]));
    const v = new KeyVerifier(store, 1000, undefined, () => now);
    for (let i = 0; i < 100; i++) expect(refusal(await v.check(k))).toBeNull();
    expect(store.lookups).toBe(1);
    now = 1001;
    await v.check(k);
    expect(store.lookups).toBe(2);
  });

  it('coalesces concurrent lookups of one key', async () => {
    const k = generateKey();
    const store = storeWith(new Map([[hashKey(k), record()]]));
    const v = new KeyVerifier(store, 1000);
    await Promise.all(Array.from({ length: 20 }, () => v.check(k)));
    expect(store.lookups).toBe(1);
  });

  it('stops a revoked key at once when the bus says so, and returns the record for logging', async () => {
    const k = generateKey();
    const keys = new Map([[hashKey(k), record()]]);
    const bus = new LocalKeyEventBus();
    const v = new KeyVerifier(storeWith(keys), 60_000, bus);
    expect(refusal(await v.check(k))).toBeNull();
    keys.set(hashKey(k), record({ revoked_at: new Date().toISOString() }));
    await bus.publish({ type: 'key_changed', key_id: 'k1' });
    const r = await v.check(k);
    expect(refusal(r)?.code).toBe('proxy_key_revoked');
    expect(r.key?.id).toBe('k1');
  });

  it('evicts by the hash an event names, a cached refusal included, and on flush_all', async () => {
    const k = generateKey();
    const other = generateKey();
    const keys = new Map<string, KeyRecord>([[hashKey(other), record({ id: 'k2' })]]);
    const bus = new LocalKeyEventBus();
    const store = storeWith(keys);
    const v = new KeyVerifier(store, 60_000, bus);
    // Not yet created: the refusal is cached…
    expect(refusal(await v.check(k))?.code).toBe('proxy_key_invalid');
    expect(refusal(await v.check(other))).toBeNull();
    keys.set(hashKey(k), record());
    // …until the event naming its hash (the record's id is not in the cache to match by).
    await bus.publish({ type: 'key_changed', key_id: 'k1', hash: hashKey(k) });
    expect(refusal(await v.check(k))).toBeNull();
    keys.set(hashKey(k), record({ revoked_at: new Date().toISOString() }));
    await bus.publish({ type: 'key_changed', key_id: 'unrelated', hash: hashKey(k) });
    expect(refusal(await v.check(k))?.code).toBe('proxy_key_revoked');
    // The other key's entry stayed: no lookup for it until flush_all.
    const before = store.lookups;
    expect(refusal(await v.check(other))).toBeNull();
    expect(store.lookups).toBe(before);
    keys.set(hashKey(other), record({ id: 'k2', revoked_at: new Date().toISOString() }));
    await bus.publish({ type: 'flush_all' });
    expect(refusal(await v.check(other))?.code).toBe('proxy_key_revoked');
    expect(v.size).toBe(1);
  });

  it('refuses an expired key once expires_at passes, without a new lookup', async () => {
    const k = generateKey();
    let now = Date.parse('2026-01-01T00:00:00Z');
    const v = new KeyVerifier(
      storeWith(new Map([[hashKey(k), record({ expires_at: '2026-01-01T00:00:10Z' })]])),
      60_000,
      undefined,
      () => now,
    );
    expect(refusal(await v.check(k))).toBeNull();
    now += 10_000;
    expect(refusal(await v.check(k))?.code).toBe('proxy_key_expired');
  });

  it('answers proxy_unavailable when the store cannot be reached', async () => {
    const v = new KeyVerifier({ getKeyByHash: () => Promise.reject(new Error('down')) }, 1000);
    expect(refusal(await v.check(generateKey()))?.code).toBe('proxy_unavailable');
  });
});

describe('KeyVerifier and concurrent key events', () => {
  it('does not cache a read that was running when a key event arrived', async () => {
    const k = generateKey();
    let release!: (r: KeyRecord | null) => void;
    let lookups = 0;
    // The first read is slow and returns the pre-revocation record; later reads see the revocation.
    const store = {
      getKeyByHash: () => {
        lookups++;
        if (lookups === 1) return new Promise<KeyRecord | null>((r) => (release = r));
        return Promise.resolve(record({ revoked_at: new Date().toISOString() }));
      },
    };
    const bus = new LocalKeyEventBus();
    const v = new KeyVerifier(store, 60_000, bus);
    const first = v.check(k);
    await bus.publish({ type: 'key_changed', key_id: 'k1' });
    const second = v.check(k); // must not join the stale read
    release(record());
    expect(refusal(await first)).toBeNull();
    expect(refusal(await second)?.code).toBe('proxy_key_revoked');
    expect(refusal(await v.check(k))?.code).toBe('proxy_key_revoked');
  });
});

/**
 * Budget leases against the real Redis on 127.0.0.1:6379 (every key id unique to the run): two limiters play
 * two instances. Syncs run only when a test calls them.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startFaultProxy } from '../../../test/helpers/fault-proxy.js';
import type { RequestLogRow } from '../../types.js';
import type { KeyRecord } from '../../store/types.js';
import type { RequestInfo } from '../../metering/index.js';
import { KeyLimiter, type Admission, type Hold } from '../limiter.js';
import { createRedisCounters } from './redis-counters.js';
import { createRedisHolds } from './redis-holds.js';
import { periodBounds } from '../periods.js';
import { keyRecord } from '../../../test/helpers/key-record.js';

const clients: Redis[] = [];
const opened: KeyLimiter[] = [];
afterAll(async () => {
  for (const l of opened) await l.close().catch(() => {});
  for (const c of clients) c.disconnect();
});

async function redis(url = 'redis://127.0.0.1:6379'): Promise<Redis> {
  const c = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: 500,
  });
  c.on('error', () => {});
  clients.push(c);
  await c.connect();
  return c;
}

function instance(client: Redis, opts: Partial<ConstructorParameters<typeof KeyLimiter>[0]> = {}) {
  const l = new KeyLimiter({
    spendSince: () => Promise.resolve(0),
    shared: createRedisCounters(client),
    holds: createRedisHolds(client),
    syncMs: 3_600_000,
    ...opts,
  });
  opened.push(l);
  return l;
}

const hardKey = (budgetUsd: number): KeyRecord =>
  keyRecord({ budget_usd: budgetUsd, budget_period: 'day', budget_mode: 'hard' });

// gpt-4o-mini, 1,000 output tokens at $0.60/M plus a short prompt: a reservation of a little over $0.0006.
const info: RequestInfo = {
  provider: 'openai',
  path: '/v1/chat/completions',
  model: 'gpt-4o-mini',
  stream: false,
  end_user: null,
  json: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1000 },
};

const row = (key: KeyRecord, cost: number) =>
  ({
    key_id: key.id,
    created_at: new Date().toISOString(),
    cost_usd: cost,
    input_tokens: 10,
    output_tokens: 500,
  }) as RequestLogRow;

const spendKey = (key: KeyRecord) =>
  `keyrelay:limits:spend:{${key.id}}:day:${periodBounds('day', Date.now()).start}`;
const holdAmounts = async (c: Redis, key: KeyRecord) =>
  Object.values(await c.hgetall(`keyrelay:limits:holdamt:{${key.id}}`)).reduce((n, v) => n + Number(v), 0);

async function admitted(a: Admission | Promise<Admission>): Promise<Hold | null> {
  const r = await a;
  return r instanceof Error ? null : r;
}

describe('budget leases (hard budget with Redis)', () => {
  it('admits from its lease without a round trip once granted, and moves settled costs into the spend', async () => {
    const c = await redis();
    const l = instance(c);
    const key = hardKey(100);
    // The first request goes to Redis on its own and asks for a lease.
    expect(l.admit(key, 'openai', info, 'POST')).toBeInstanceOf(Promise);
    await l.sync();
    expect(await holdAmounts(c, key)).toBeGreaterThan(0);
    // Now from memory: no promise, for as long as the lease lasts, renewed by each sync.
    const holds: Hold[] = [];
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 20; i++) {
        const a = l.admit(key, 'openai', info, 'POST');
        if (a instanceof Promise) continue;
        holds.push(a as Hold);
      }
      await l.sync();
    }
    expect(holds.length).toBeGreaterThanOrEqual(60);
    for (const h of holds) l.settle(h, row(key, 0.0004));
    await l.sync();
    // The costs are in the shared spend (the first request is still open and holds its own reservation).
    expect(Number(await c.get(spendKey(key)))).toBe(holds.length * 400_000);
    // Idle with nothing in flight from the lease: it is given back.
    await l.sync();
    await l.sync();
    const fields = await c.hkeys(`keyrelay:limits:holdamt:{${key.id}}`);
    expect(fields.filter((f) => f.includes('lease'))).toEqual([]);
  });

  it('two instances never reserve more than the budget between them, and use all of it', async () => {
    const a = instance(await redis());
    const b = instance(await redis());
    const key = hardKey(0.0066); // room for 10 reservations of ~$0.00061, not 11
    const open: Hold[] = [];
    // Waves of concurrent admissions on both, syncing (lease renewals) between waves; nothing settles.
    for (let wave = 0; wave < 6; wave++) {
      const got = await Promise.all(
        Array.from({ length: 8 }, (_, i) => admitted((i % 2 ? a : b).admit(key, 'openai', info, 'POST'))),
      );
      for (const h of got) if (h) open.push(h);
      await Promise.all([a.sync(), b.sync()]);
    }
    expect(open.length).toBeLessThanOrEqual(10);
    const reserved = open.reduce((n, h) => n + h.nanos, 0);
    expect(reserved).toBeLessThanOrEqual(6_600_000);
    // Leases idle with nothing to lend are given back, so what is left is usable by either instance.
    await Promise.all([a.sync(), b.sync()]);
    await Promise.all([a.sync(), b.sync()]);
    for (let i = 0; open.length < 10 && i < 10; i++) {
      const h = await admitted((i % 2 ? a : b).admit(key, 'openai', info, 'POST'));
      if (h) open.push(h);
    }
    expect(open.length).toBe(10);
    expect(await admitted(a.admit(key, 'openai', info, 'POST'))).toBeNull();
    for (const [i, h] of open.entries()) (i % 2 ? a : b).settle(h, row(key, 0.0006));
  });

  it('keeps a lease’s settled costs when Redis is lost, and pushes them once it answers', async () => {
    const proxy = await startFaultProxy({ host: '127.0.0.1', port: 6379 });
    try {
      const c = await redis(`redis://${proxy.host}`);
      const l = instance(c);
      const key = hardKey(100);
      // The first request waits for the log's spend, the second asks for a lease, the third uses it.
      await admitted(l.admit(key, 'openai', info, 'POST'));
      await admitted(l.admit(key, 'openai', info, 'POST'));
      await l.sync();
      const h = l.admit(key, 'openai', info, 'POST');
      expect(h).not.toBeInstanceOf(Promise);
      l.settle(h as Hold, row(key, 0.25));
      proxy.cut('refuse');
      await l.sync();
      // Admission goes local meanwhile, on what this instance knows.
      expect(await admitted(l.admit(key, 'openai', info, 'POST'))).not.toBeNull();
      proxy.restore();
      const direct = await redis();
      for (let i = 0; i < 50 && Number(await direct.get(spendKey(key))) < 250_000_000; i++) {
        await new Promise((r) => setTimeout(r, 50));
        await l.sync();
      }
      expect(Number(await direct.get(spendKey(key)))).toBe(250_000_000);
    } finally {
      await proxy.close();
    }
  });

  it('a lease of an instance that died lapses within the hold TTL', async () => {
    const ttl = 600;
    const dying = instance(await redis(), { holdTtlMs: ttl });
    const other = instance(await redis(), { holdTtlMs: ttl });
    const key = hardKey(0.0066);
    await admitted(dying.admit(key, 'openai', info, 'POST'));
    await admitted(dying.admit(key, 'openai', info, 'POST'));
    await dying.sync();
    expect(dying.admit(key, 'openai', info, 'POST')).not.toBeInstanceOf(Promise);
    const c = await redis();
    const fields = await c.hkeys(`keyrelay:limits:holdamt:{${key.id}}`);
    expect(fields.filter((f) => f.includes('.lease.'))).toHaveLength(1);
    // It stops syncing (as a killed process would) and never settles; its lease and request expire.
    const until = Date.now() + ttl + 200;
    while (Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    const got: (Hold | null)[] = [];
    for (let i = 0; i < 10; i++) got.push(await admitted(other.admit(key, 'openai', info, 'POST')));
    expect(got.filter(Boolean).length).toBe(10);
  });
});

/** Against the real Redis on 127.0.0.1:6379; every key id is unique to the run. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedisCounters } from './redis-counters.js';

const client = new Redis('redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 1 });
afterAll(() => client.quit());
const counters = createRedisCounters(client);

describe('Redis limit counters', () => {
  it('adds rate deltas of every instance per window and reads the previous window back', async () => {
    const k = randomUUID();
    expect(await counters.pushRate([{ keyId: k, window: 100, delta: 3 }])).toEqual([[3, 0]]);
    expect(await counters.pushRate([{ keyId: k, window: 100, delta: 2 }])).toEqual([[5, 0]]);
    expect(await counters.pushRate([{ keyId: k, window: 101, delta: 0 }])).toEqual([[0, 5]]);
    const ttl = await client.pttl(`keyrelay:limits:rpm:{${k}}:100`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(180_000);
  });

  it('reads a window and the one before without adding to either', async () => {
    const k = randomUUID();
    expect(await counters.readRate(k, 200, 'tpm')).toEqual([0, 0]);
    await counters.pushRate([{ keyId: k, window: 199, delta: 700 }], 'tpm');
    await counters.pushRate([{ keyId: k, window: 200, delta: 40 }], 'tpm');
    expect(await counters.readRate(k, 200, 'tpm')).toEqual([40, 700]);
    expect(await counters.readRate(k, 200, 'tpm')).toEqual([40, 700]);
    expect(await counters.readRate(k, 200, 'rpm')).toEqual([0, 0]);
  });

  it('seeds a missing spend total with the first instance’s estimate, then only adds deltas', async () => {
    const k = randomUUID();
    const d = { keyId: k, period: 'day' as const, start: 0, end: Date.now() + 60_000 };
    expect(await counters.pushSpend([{ ...d, delta: 5, seed: 105 }], Date.now())).toEqual([105]);
    expect(await counters.pushSpend([{ ...d, delta: 7, seed: 999 }], Date.now())).toEqual([112]);
    expect(await counters.pushSpend([{ ...d, delta: 0, seed: 0 }], Date.now())).toEqual([112]);
    expect(await client.pttl(`keyrelay:limits:spend:{${k}}:day:0`)).toBeGreaterThan(60_000);
  });

  it('answers null for every delta when Redis cannot be reached', async () => {
    const down = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    down.on('error', () => {});
    const offline = createRedisCounters(down);
    expect(await offline.pushRate([{ keyId: 'x', window: 1, delta: 1 }])).toEqual([null]);
    down.disconnect();
  });
});

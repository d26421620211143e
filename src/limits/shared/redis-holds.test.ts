/** The hold scripts against the real Redis on 127.0.0.1:6379 (every key id unique to the run). */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedisHolds } from './redis-holds.js';

const client = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
afterAll(() => client.quit());
const holds = createRedisHolds(client);

describe('Redis holds', () => {
  it('takes a slot and a reservation, pushes their expiry while they run, and releases both with the cost', async () => {
    const keyId = randomUUID();
    const now = Date.now();
    const period = { period: 'day' as const, start: 0, end: now + 60_000 };
    const r = { keyId, holdId: 'h1', budget: 1_000, amount: 600, seed: 100, slots: 1, ...period };
    expect(await holds.admit(r, now, 1_000)).toEqual({ ok: true, spent: 100, reserved: 0 });
    // No room for a second: the slot is taken, and so is the budget.
    expect(await holds.admit({ ...r, holdId: 'h2' }, now, 1_000)).toMatchObject({
      ok: false,
      reason: 'slots',
    });
    expect(await holds.admit({ ...r, holdId: 'h2', slots: null }, now, 1_000)).toMatchObject({
      ok: false,
      reason: 'budget',
      reserved: 600,
    });
    // A refresh (a pipeline of the defined script) pushes both expiries.
    await holds.refresh(new Map([[keyId, ['h1']]]), now + 60_000);
    expect(Number(await client.zscore(`keyrelay:limits:holds:{${keyId}}`, 'h1'))).toBe(now + 60_000);
    expect(Number(await client.zscore(`keyrelay:limits:inflight:{${keyId}}`, 'h1'))).toBe(now + 60_000);
    // Past the old expiry the hold still counts.
    expect(await holds.admit({ ...r, holdId: 'h3', slots: null }, now + 5_000, 1_000)).toMatchObject({
      ok: false,
      reserved: 600,
    });
    expect(await holds.settle({ keyId, holdId: 'h1', ...period }, 450, 100, now)).toBe(550);
    expect(await client.hlen(`keyrelay:limits:holdamt:{${keyId}}`)).toBe(0);
    expect(await holds.admit({ ...r, holdId: 'h4', amount: 450 }, now, 1_000)).toMatchObject({ ok: true });
  });

  it('renews a lease: moves its costs into the spend, grants at most a quarter of the room, keeps what is open', async () => {
    const keyId = randomUUID();
    const now = Date.now();
    const base = {
      keyId,
      leaseId: 'L',
      budget: 10_000,
      seed: 0,
      period: 'day' as const,
      start: 0,
      end: now + 60_000,
    };
    expect(await holds.lease({ ...base, cost: 0, want: 9_000, keep: 0 }, now, 1_000)).toEqual({
      spent: 0,
      others: 0,
      granted: 2_500,
    });
    // Another instance's hold counts as the others'; the lease's costs move into the spend.
    await holds.admit(
      {
        keyId,
        holdId: 'x',
        budget: 10_000,
        amount: 1_000,
        seed: 0,
        slots: null,
        period: 'day',
        start: 0,
        end: now + 60_000,
      },
      now,
      1_000,
    );
    expect(await holds.lease({ ...base, cost: 2_000, want: 9_000, keep: 0 }, now, 1_000)).toEqual({
      spent: 2_000,
      others: 1_000,
      granted: 1_750,
    });
    // Asked to shrink below what its requests in flight hold: it keeps that.
    expect(await holds.lease({ ...base, cost: 0, want: 0, keep: 300 }, now, 1_000)).toMatchObject({
      granted: 300,
    });
    // Given back.
    expect(await holds.lease({ ...base, cost: 300, want: 0, keep: 0 }, now, 1_000)).toMatchObject({
      spent: 2_300,
      granted: 0,
    });
    expect(await client.hget(`keyrelay:limits:holdamt:{${keyId}}`, 'L')).toBeNull();
  });
});

import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLoginThrottle } from './redis-throttle.js';

const limits = { windowMs: 60_000, maxPerEmail: 3, maxPerIp: 5 };

describe('RedisLoginThrottle', () => {
  const prefix = `kr-test-${randomBytes(6).toString('hex')}:`;
  let a: Redis;
  let b: Redis;

  beforeAll(() => {
    a = new Redis('redis://127.0.0.1:6379', { lazyConnect: false });
    b = new Redis('redis://127.0.0.1:6379', { lazyConnect: false });
  });
  afterAll(async () => {
    const keys = await a.keys(`${prefix}*`);
    if (keys.length > 0) await a.del(...keys);
    a.disconnect();
    b.disconnect();
  });

  it('shares counts between two instances on separate connections', async () => {
    const one = new RedisLoginThrottle(a, { prefix, limits });
    const two = new RedisLoginThrottle(b, { prefix, limits });
    const s = { email: 'shared@x.io', ip: '10.1.0.1' };
    expect((await one.attempt(s)).allowed).toBe(true);
    expect((await two.attempt(s)).allowed).toBe(true);
    expect((await one.attempt(s)).allowed).toBe(true);
    const refused = await two.attempt(s);
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 60 });
  });

  it('limits one IP across emails, and other IPs stay free', async () => {
    const one = new RedisLoginThrottle(a, { prefix, limits });
    const two = new RedisLoginThrottle(b, { prefix, limits });
    for (let i = 0; i < 5; i++) {
      expect((await (i % 2 ? one : two).attempt({ email: `ip${i}@x.io`, ip: '10.2.0.1' })).allowed).toBe(
        true,
      );
    }
    expect((await one.attempt({ email: 'other@x.io', ip: '10.2.0.1' })).allowed).toBe(false);
    expect((await two.attempt({ email: 'other@x.io', ip: '10.2.0.2' })).allowed).toBe(true);
  });

  it('counts an attempt without an email in the IP window alone, shared with logins, and takes it back', async () => {
    const one = new RedisLoginThrottle(a, { prefix, limits });
    const two = new RedisLoginThrottle(b, { prefix, limits });
    const ip = '10.5.0.1';
    expect((await one.attempt({ email: 'l@x.io', ip })).allowed).toBe(true);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await (i % 2 ? one : two).attempt({ ip });
      if (!r.allowed) throw new Error(`attempt ${i + 1} refused`);
      ids.push(r.attemptId);
    }
    expect((await one.attempt({ ip })).allowed).toBe(false);
    expect((await two.attempt({ email: 'm@x.io', ip })).allowed).toBe(false);
    await two.recordSuccess({ ip }, ids[0]!);
    expect((await one.attempt({ ip })).allowed).toBe(true);
    // The email's window was never touched: it still has room for its own limit.
    expect((await one.attempt({ email: 'l@x.io', ip: '10.5.0.2' })).allowed).toBe(true);
  });

  it('admits exactly the limit when attempts race', async () => {
    const one = new RedisLoginThrottle(a, { prefix, limits });
    const two = new RedisLoginThrottle(b, { prefix, limits });
    const s = { email: 'race@x.io', ip: '10.3.0.1' };
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? one : two).attempt(s)));
    expect(results.filter((r) => r.allowed)).toHaveLength(3);
  });

  it('clears the email window after a success seen by the other instance', async () => {
    const one = new RedisLoginThrottle(a, { prefix, limits });
    const two = new RedisLoginThrottle(b, { prefix, limits });
    const s = { email: 'ok@x.io', ip: '10.4.0.1' };
    await one.attempt(s);
    await one.attempt(s);
    const third = await one.attempt(s);
    if (!third.allowed) throw new Error('expected allowed');
    await one.recordSuccess(s, third.attemptId);
    expect((await two.attempt(s)).allowed).toBe(true);
    expect(await a.zcard(`${prefix}login:ip:10.4.0.1`)).toBe(3);
  });

  it('lets an attempt back in once the oldest counted one leaves the window', async () => {
    let now = 5_000_000;
    const one = new RedisLoginThrottle(a, { prefix, limits, now: () => now });
    const s = { email: 'later@x.io', ip: '10.6.0.1' };
    for (let i = 0; i < 3; i++) {
      expect((await one.attempt(s)).allowed).toBe(true);
      now += 10_000;
    }
    expect(await one.attempt(s)).toEqual({ allowed: false, retryAfterSeconds: 30 });
    now += 30_000;
    expect((await one.attempt(s)).allowed).toBe(true);
  });

  it('keeps no personal data in key names', async () => {
    const one = new RedisLoginThrottle(a, { prefix, limits });
    await one.attempt({ email: 'private.person@x.io', ip: '10.5.0.1' });
    const keys = await a.keys(`${prefix}*`);
    expect(keys.some((k) => k.includes('private.person'))).toBe(false);
  });
});

import { describe, expect, it } from 'vitest';
import { DEFAULT_THROTTLE_LIMITS, ipBucket, MemoryLoginThrottle, type ThrottleAttempt } from './throttle.js';

const MIN = 60_000;

function expectRefused(a: ThrottleAttempt): number {
  expect(a.allowed).toBe(false);
  return a.allowed ? 0 : a.retryAfterSeconds;
}

describe('MemoryLoginThrottle', () => {
  it('defaults to 5 attempts per email and 20 per IP in 15 minutes', () => {
    expect(DEFAULT_THROTTLE_LIMITS).toEqual({ windowMs: 15 * MIN, maxPerEmail: 5, maxPerIp: 20 });
  });

  it('refuses the 6th attempt on one email from any IP, with the wait until the oldest leaves the window', async () => {
    let now = 1_000_000;
    const t = new MemoryLoginThrottle(DEFAULT_THROTTLE_LIMITS, () => now);
    for (let i = 0; i < 5; i++) {
      expect((await t.attempt({ email: 'a@x.io', ip: `10.0.0.${i}` })).allowed).toBe(true);
      now += MIN;
    }
    expect(expectRefused(await t.attempt({ email: 'a@x.io', ip: '10.9.9.9' }))).toBe(10 * 60);
    expect((await t.attempt({ email: 'b@x.io', ip: '10.9.9.9' })).allowed).toBe(true);
    now += 10 * MIN;
    expect((await t.attempt({ email: 'a@x.io', ip: '10.9.9.9' })).allowed).toBe(true);
  });

  it('refuses the 21st attempt from one IP whatever the email', async () => {
    const t = new MemoryLoginThrottle();
    for (let i = 0; i < 20; i++)
      expect((await t.attempt({ email: `u${i}@x.io`, ip: '10.0.0.1' })).allowed).toBe(true);
    expect(expectRefused(await t.attempt({ email: 'new@x.io', ip: '10.0.0.1' }))).toBeGreaterThan(0);
    expect((await t.attempt({ email: 'new@x.io', ip: '10.0.0.2' })).allowed).toBe(true);
  });

  it('does not count refused attempts, so the block lifts on time', async () => {
    let now = 0;
    const t = new MemoryLoginThrottle({ windowMs: 10_000, maxPerEmail: 2, maxPerIp: 100 }, () => now);
    await t.attempt({ email: 'a@x.io', ip: 'i' });
    await t.attempt({ email: 'a@x.io', ip: 'i' });
    for (let i = 0; i < 9; i++) {
      now += 1000;
      expectRefused(await t.attempt({ email: 'a@x.io', ip: 'i' }));
    }
    now = 10_000;
    expect((await t.attempt({ email: 'a@x.io', ip: 'i' })).allowed).toBe(true);
  });

  it('forgets the email window and the successful attempt on success', async () => {
    const t = new MemoryLoginThrottle({ windowMs: 10_000, maxPerEmail: 2, maxPerIp: 2 });
    await t.attempt({ email: 'a@x.io', ip: 'i' });
    const ok = await t.attempt({ email: 'a@x.io', ip: 'i' });
    if (!ok.allowed) throw new Error('expected allowed');
    await t.recordSuccess({ email: 'a@x.io', ip: 'i' }, ok.attemptId);
    // Email window cleared, IP window holds only the failed attempt: one more fits.
    expect((await t.attempt({ email: 'a@x.io', ip: 'i' })).allowed).toBe(true);
    expectRefused(await t.attempt({ email: 'a@x.io', ip: 'i' }));
  });
});

describe('ipBucket', () => {
  it('keeps IPv4 addresses, unwraps IPv4-mapped IPv6 and groups IPv6 by /64', () => {
    expect(ipBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(ipBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(ipBucket('2001:db8:0:1:aaaa::1')).toBe('2001:db8:0:1::/64');
    expect(ipBucket('2001:0db8:0000:0001:ffff:ffff:ffff:ffff')).toBe('2001:db8:0:1::/64');
    expect(ipBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(ipBucket('::1')).toBe('0:0:0:0::/64');
    expect(ipBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    // Forwarded headers can carry anything; junk must not throw.
    expect(ipBucket('1:2:3:4:5:6:7:8::9:10')).toBe('1:2:3:4::/64');
  });

  it('counts every address of one IPv6 /64 against the same window', async () => {
    const t = new MemoryLoginThrottle({ windowMs: 60_000, maxPerEmail: 100, maxPerIp: 2 });
    await t.attempt({ email: 'a@x.io', ip: '2001:db8:0:1::1' });
    await t.attempt({ email: 'b@x.io', ip: '2001:db8:0:1::2' });
    expectRefused(await t.attempt({ email: 'c@x.io', ip: '2001:db8:0:1:ffff::3' }));
    expect((await t.attempt({ email: 'c@x.io', ip: '2001:db8:0:2::1' })).allowed).toBe(true);
  });
});

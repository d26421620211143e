/**
 * LoginThrottle shared by every instance through Redis: one sorted set per email and per IP (score = time
 * of the attempt). Check and count run in one Lua script, so two instances racing see the same counts.
 */
import type { Redis } from 'ioredis';
import {
  DEFAULT_THROTTLE_LIMITS,
  newAttemptId,
  throttleKeys,
  type LoginThrottle,
  type ThrottleAttempt,
  type ThrottleLimits,
  type ThrottleSubject,
} from './throttle.js';

// KEYS: the windows (email and IP, or the IP's alone). ARGV: now ('' = Redis's own clock, one clock for all
// instances), windowMs, attemptId, then each window's limit. Returns 0 when counted, else the ms to wait until
// the fullest window has room.
const ATTEMPT_SCRIPT = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local window = tonumber(ARGV[2])
local wait = 0
for i = 1, #KEYS do
  local limit = tonumber(ARGV[3 + i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local n = redis.call('ZCARD', KEYS[i])
  if n >= limit then
    local blocking = redis.call('ZRANGE', KEYS[i], n - limit, n - limit, 'WITHSCORES')
    local w = tonumber(blocking[2]) + window - now
    if w < 1 then w = 1 end
    if w > wait then wait = w end
  end
end
if wait > 0 then return wait end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[i], window)
end
return 0
`;

export interface RedisThrottleOptions {
  /** Namespace for the keys (tests use a unique one per run). */
  prefix?: string;
  limits?: ThrottleLimits;
  /** Clock in ms; by default Redis's own, so instances with skewed clocks still agree. */
  now?: () => number;
}

/** The Redis connection belongs to the caller; close() leaves it open. */
export class RedisLoginThrottle implements LoginThrottle {
  private prefix: string;
  private limits: ThrottleLimits;
  private now: (() => number) | undefined;

  constructor(
    private redis: Redis,
    opts: RedisThrottleOptions = {},
  ) {
    this.prefix = opts.prefix ?? 'keyrelay:';
    this.limits = opts.limits ?? DEFAULT_THROTTLE_LIMITS;
    this.now = opts.now;
  }

  async attempt(s: ThrottleSubject): Promise<ThrottleAttempt> {
    const now = this.now?.();
    const k = this.keys(s);
    const attemptId = newAttemptId(now ?? Date.now());
    const { windowMs, maxPerEmail, maxPerIp } = this.limits;
    const windows: [string, number][] = k.email === null ? [] : [[k.email, maxPerEmail]];
    windows.push([k.ip, maxPerIp]);
    const wait = Number(
      await this.redis.eval(
        ATTEMPT_SCRIPT,
        windows.length,
        ...windows.map(([key]) => key),
        now ?? '',
        windowMs,
        attemptId,
        ...windows.map(([, limit]) => limit),
      ),
    );
    if (wait > 0) return { allowed: false, retryAfterSeconds: Math.ceil(wait / 1000) };
    return { allowed: true, attemptId };
  }

  async recordSuccess(s: ThrottleSubject, attemptId: string): Promise<void> {
    const k = this.keys(s);
    const tx = this.redis.multi();
    if (k.email !== null) tx.del(k.email);
    await tx.zrem(k.ip, attemptId).exec();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private keys(s: ThrottleSubject): { email: string | null; ip: string } {
    const k = throttleKeys(s);
    return {
      email: k.email === null ? null : `${this.prefix}login:email:${k.email}`,
      ip: `${this.prefix}login:ip:${k.ip}`,
    };
  }
}

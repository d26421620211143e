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

// KEYS: email window, ip window. ARGV: now ('' = Redis's own clock, one clock for all instances), windowMs,
// maxPerEmail, maxPerIp, attemptId. Returns 0 when counted, else the ms to wait until the fuller window has room.
const ATTEMPT_SCRIPT = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local window = tonumber(ARGV[2])
local limits = { tonumber(ARGV[3]), tonumber(ARGV[4]) }
local wait = 0
for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local n = redis.call('ZCARD', KEYS[i])
  if n >= limits[i] then
    local blocking = redis.call('ZRANGE', KEYS[i], n - limits[i], n - limits[i], 'WITHSCORES')
    local w = tonumber(blocking[2]) + window - now
    if w < 1 then w = 1 end
    if w > wait then wait = w end
  end
end
if wait > 0 then return wait end
for i = 1, 2 do
  redis.call('ZADD', KEYS[i], now, ARGV[5])
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
    const wait = Number(
      await this.redis.eval(
        ATTEMPT_SCRIPT,
        2,
        k.email,
        k.ip,
        now ?? '',
        windowMs,
        maxPerEmail,
        maxPerIp,
        attemptId,
      ),
    );
    if (wait > 0) return { allowed: false, retryAfterSeconds: Math.ceil(wait / 1000) };
    return { allowed: true, attemptId };
  }

  async recordSuccess(s: ThrottleSubject, attemptId: string): Promise<void> {
    const k = this.keys(s);
    await this.redis.multi().del(k.email).zrem(k.ip, attemptId).exec();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private keys(s: ThrottleSubject): { email: string; ip: string } {
    const k = throttleKeys(s);
    return { email: `${this.prefix}login:email:${k.email}`, ip: `${this.prefix}login:ip:${k.ip}` };
  }
}

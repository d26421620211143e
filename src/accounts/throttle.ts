/**
 * Login throttling: a sliding window per account (email) and per client IP. An attempt is counted BEFORE
 * the password is checked, atomically with the limit check, so a burst of parallel guesses cannot slip
 * past a check-then-record gap; a successful login clears its email's window and takes its own attempt
 * back out of the IP's window (so many people behind one NAT can still log in). A refused attempt is not
 * counted, so the block lifts when the oldest counted failure leaves the window.
 *
 * The email window is keyed whether or not the account exists, so 429 tells nothing about existence.
 * Trade-off: anyone can delay a given account's logins by 15 minutes with 5 bad guesses; rate limiting per
 * IP alone would let a botnet guess without bound, so we accept that (OWASP's stance).
 * https://cheatsheetseries.owasp.org/cheatsheets/Authentication_Cheat_Sheet.html#login-throttling
 */
import { createHash, randomBytes } from 'node:crypto';

export interface ThrottleLimits {
  windowMs: number;
  maxPerEmail: number;
  maxPerIp: number;
}

/** OWASP's order of magnitude: a person mistypes a few times in 15 minutes; a guesser needs thousands. */
export const DEFAULT_THROTTLE_LIMITS: Readonly<ThrottleLimits> = Object.freeze({
  windowMs: 15 * 60_000,
  maxPerEmail: 5,
  maxPerIp: 20,
});

export interface ThrottleSubject {
  /** Normalised (lower-cased); absent: the IP's window alone counts (a single sign-on start guesses nothing). */
  email?: string;
  ip: string;
}

export type ThrottleAttempt =
  { allowed: true; attemptId: string } | { allowed: false; retryAfterSeconds: number };

export interface LoginThrottle {
  /** Counts an attempt for the email and the IP unless either window is full; then says how long to wait. */
  attempt(s: ThrottleSubject): Promise<ThrottleAttempt>;
  /** After a successful login: forget the email's failures and this attempt's IP entry. */
  recordSuccess(s: ThrottleSubject, attemptId: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The unit an attacker cannot cheaply multiply: an IPv4 address, or an IPv6 /64 (one customer's subnet,
 * which holds 2^64 addresses to rotate through).
 */
export function ipBucket(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (!ip.includes(':')) return ip;
  const [head = '', tail] = ip.split('%')[0]!.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/** Email addresses are personal data: the throttle's keys carry a hash, not the address. */
export function throttleKeys(s: ThrottleSubject): { email: string | null; ip: string } {
  return {
    email: s.email === undefined ? null : createHash('sha256').update(s.email).digest('hex').slice(0, 32),
    ip: ipBucket(s.ip),
  };
}

export function newAttemptId(now: number): string {
  return `${now}-${randomBytes(6).toString('hex')}`;
}

interface Window {
  entries: { at: number; id: string }[];
}

const MAX_TRACKED = 100_000;

/** One instance's memory. Fine for a single instance; use RedisLoginThrottle when several share the load. */
export class MemoryLoginThrottle implements LoginThrottle {
  private windows = new Map<string, Window>();

  constructor(
    private limits: ThrottleLimits = DEFAULT_THROTTLE_LIMITS,
    private now: () => number = Date.now,
  ) {}

  attempt(s: ThrottleSubject): Promise<ThrottleAttempt> {
    const now = this.now();
    const k = throttleKeys(s);
    const email = k.email === null ? null : this.window(`e:${k.email}`, now);
    const ip = this.window(`i:${k.ip}`, now);
    const wait = Math.max(
      email ? this.waitMs(email, this.limits.maxPerEmail, now) : 0,
      this.waitMs(ip, this.limits.maxPerIp, now),
    );
    if (wait > 0) return Promise.resolve({ allowed: false, retryAfterSeconds: Math.ceil(wait / 1000) });
    const attemptId = newAttemptId(now);
    email?.entries.push({ at: now, id: attemptId });
    ip.entries.push({ at: now, id: attemptId });
    return Promise.resolve({ allowed: true, attemptId });
  }

  recordSuccess(s: ThrottleSubject, attemptId: string): Promise<void> {
    const k = throttleKeys(s);
    if (k.email !== null) this.windows.delete(`e:${k.email}`);
    const ip = this.windows.get(`i:${k.ip}`);
    if (ip) ip.entries = ip.entries.filter((e) => e.id !== attemptId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.windows.clear();
    return Promise.resolve();
  }

  private window(key: string, now: number): Window {
    let w = this.windows.get(key);
    if (!w) {
      if (this.windows.size >= MAX_TRACKED) this.evictStale(now);
      w = { entries: [] };
      this.windows.set(key, w);
    }
    const cutoff = now - this.limits.windowMs;
    if (w.entries.length > 0 && w.entries[0]!.at <= cutoff)
      w.entries = w.entries.filter((e) => e.at > cutoff);
    return w;
  }

  /** 0 when there is room; else ms until enough entries leave the window to make room for one. */
  private waitMs(w: Window, max: number, now: number): number {
    if (w.entries.length < max) return 0;
    const blocking = w.entries[w.entries.length - max]!;
    return Math.max(1, blocking.at + this.limits.windowMs - now);
  }

  private evictStale(now: number): void {
    const cutoff = now - this.limits.windowMs;
    for (const [key, w] of this.windows) if (!w.entries.some((e) => e.at > cutoff)) this.windows.delete(key);
    // Under a flood of distinct keys, forgetting everything beats growing without bound.
    if (this.windows.size >= MAX_TRACKED) this.windows.clear();
  }
}

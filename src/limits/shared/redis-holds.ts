/**
 * Holds shared by every instance through Redis: hard-budget reservations and in-flight slots. Admission is
 * one Lua script, so no two instances can both take the last of a budget or a slot: it drops lapsed holds,
 * checks `slots in use < limit` and `spend + reserved + amount ≤ budget`, and takes both or neither. Each
 * hold carries an expiry that its instance pushes forward while the request runs; a crashed instance stops
 * doing so and its holds lapse within one TTL. Settling releases the hold and adds the real cost to the
 * period's spend in one script, so no instance ever sees the reservation gone and the cost not yet there.
 *
 * A lease (limits/leases.ts) is a hold too: a share of the budget one instance reserves for many requests,
 * resized and charged with the costs settled under it by one script at a time.
 *
 * Keys (the `{keyId}` hash tag keeps them in one Redis Cluster slot): the period's spend (shared with the
 * soft-budget sync, redis-counters.ts), a sorted set of reservation ids by expiry with a hash of their
 * amounts, and a sorted set of in-flight slot ids by expiry.
 *
 * The scripts are defined commands: Redis gets each script's text once and its SHA1 afterwards (EVALSHA),
 * not ~1 KB of Lua with every request.
 */
import type { ChainableCommander, Redis } from 'ioredis';
import type { BudgetPeriod } from '../../store/types.js';
import { SPEND_GRACE_MS, spendKey } from './redis-counters.js';

const ADMIT_SCRIPT = `
local now = tonumber(ARGV[1])
local function sweep(z, h)
  local dead = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 500)
  if #dead > 0 then
    redis.call('ZREM', z, unpack(dead))
    if h then redis.call('HDEL', h, unpack(dead)) end
  end
end
local slots = tonumber(ARGV[8])
if slots >= 0 then
  sweep(KEYS[4], nil)
  if redis.call('ZCARD', KEYS[4]) >= slots then return {1, 0, 0} end
end
local budget = tonumber(ARGV[5])
local spent, reserved = 0, 0
if budget >= 0 then
  sweep(KEYS[2], KEYS[3])
  local s = redis.call('GET', KEYS[1])
  if not s then
    redis.call('SET', KEYS[1], ARGV[6], 'PX', ARGV[7])
    s = ARGV[6]
  end
  spent = tonumber(s)
  for _, v in ipairs(redis.call('HVALS', KEYS[3])) do reserved = reserved + tonumber(v) end
  local amount = tonumber(ARGV[4])
  if spent + reserved + amount > budget then return {2, spent, reserved} end
  redis.call('HSET', KEYS[3], ARGV[3], amount)
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
  redis.call('PEXPIREAT', KEYS[2], ARGV[2])
  redis.call('PEXPIREAT', KEYS[3], ARGV[2])
end
if slots >= 0 then
  redis.call('ZADD', KEYS[4], ARGV[2], ARGV[3])
  redis.call('PEXPIREAT', KEYS[4], ARGV[2])
end
return {0, spent, reserved}`;

const SETTLE_SCRIPT = `
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local cost = tonumber(ARGV[2])
if cost > 0 then
  if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], cost) end
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  return tonumber(ARGV[3])
end
return tonumber(redis.call('GET', KEYS[1]) or '-1')`;

/**
 * A lease's renewal. Moves the costs settled under the lease into the period's spend and sets the lease to
 * the smaller of what the instance asks for and a quarter of the room the others leave (so several instances
 * share what is left, and near the budget requests go back to one admission each), but never below what its
 * requests in flight still hold. Returns {spent, reserved by others, granted}.
 */
const LEASE_SCRIPT = `
local now = tonumber(ARGV[1])
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 500)
if #dead > 0 then
  redis.call('ZREM', KEYS[2], unpack(dead))
  redis.call('HDEL', KEYS[3], unpack(dead))
end
local cost = tonumber(ARGV[4])
local spent
if redis.call('EXISTS', KEYS[1]) == 1 then
  spent = redis.call('INCRBY', KEYS[1], cost)
else
  redis.call('SET', KEYS[1], ARGV[6], 'PX', ARGV[7])
  spent = tonumber(ARGV[6])
end
local others = 0
local own = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0')
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do others = others + tonumber(v) end
others = others - own
local grant = math.floor((tonumber(ARGV[5]) - spent - others) / 4)
local want = tonumber(ARGV[8])
if grant > want then grant = want end
local keep = tonumber(ARGV[9])
if grant < keep then grant = keep end
if grant <= 0 then
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('HDEL', KEYS[3], ARGV[3])
  return {spent, others, 0}
end
redis.call('HSET', KEYS[3], ARGV[3], grant)
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
redis.call('PEXPIREAT', KEYS[3], ARGV[2])
return {spent, others, grant}`;

// Pushes the expiry of holds still running; XX: a hold that lapsed or was settled meanwhile stays gone.
const REFRESH_SCRIPT = `
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i])
  redis.call('ZADD', KEYS[2], 'XX', ARGV[1], ARGV[i])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[3], ARGV[1])
return 1`;

export interface SharedHoldRequest {
  keyId: string;
  holdId: string;
  /** Budget in nanodollars and this request's reservation; budget null: no budget check. */
  budget: number | null;
  amount: number;
  period: BudgetPeriod;
  start: number;
  end: number;
  /** This instance's estimate of the period's spend: the shared total starts from it if missing. */
  seed: number;
  /** Most slots in use at once; null: no slot taken. */
  slots: number | null;
}

export type AdmitReply =
  | { ok: true; spent: number; reserved: number }
  | { ok: false; reason: 'slots' | 'budget'; spent: number; reserved: number };

export interface LeaseRequest {
  keyId: string;
  leaseId: string;
  /** Nanodollars: the budget, the costs settled under the lease since its last renewal, the instance's
   * estimate of the period's spend (the shared total starts from it if missing). */
  budget: number;
  cost: number;
  seed: number;
  period: BudgetPeriod;
  start: number;
  end: number;
  /** What the instance asks for, and the least it must keep (what its requests in flight hold). */
  want: number;
  keep: number;
}

export interface LeaseReply {
  spent: number;
  others: number;
  granted: number;
}

export interface SharedHolds {
  admit(r: SharedHoldRequest, now: number, ttlMs: number): Promise<AdmitReply>;
  /** Releases a hold and adds its cost; resolves with the period's shared spend (-1 if unknown). */
  settle(
    h: Pick<SharedHoldRequest, 'keyId' | 'holdId' | 'period' | 'start' | 'end'>,
    cost: number,
    seed: number,
    now: number,
  ): Promise<number>;
  /** Renews (takes, resizes, releases) a lease; see LEASE_SCRIPT. */
  lease(r: LeaseRequest, now: number, ttlMs: number): Promise<LeaseReply>;
  /** Pushes the expiry of running holds, per key. */
  refresh(byKey: ReadonlyMap<string, readonly string[]>, until: number): Promise<void>;
}

const holdKeys = (keyId: string) => [
  `keyrelay:limits:holds:{${keyId}}`,
  `keyrelay:limits:holdamt:{${keyId}}`,
  `keyrelay:limits:inflight:{${keyId}}`,
];

const SCRIPTS = {
  admit: [4, ADMIT_SCRIPT],
  settle: [4, SETTLE_SCRIPT],
  lease: [3, LEASE_SCRIPT],
  refresh: [3, REFRESH_SCRIPT],
} as const;
type Script = keyof typeof SCRIPTS;
const commandName = (s: Script) => `keyrelayHold_${s}`;

/** Runs a defined script on a client or a pipeline (ioredis adds defined commands to both as methods). */
function call(target: Redis | ChainableCommander, s: Script, ...args: (string | number)[]): unknown {
  return (target as unknown as Record<string, (...a: (string | number)[]) => unknown>)[commandName(s)]!(
    ...args,
  );
}

export function createRedisHolds(client: Redis): SharedHolds {
  for (const [s, [numberOfKeys, lua]] of Object.entries(SCRIPTS))
    client.defineCommand(commandName(s as Script), { numberOfKeys, lua });
  return {
    async admit(r, now, ttlMs) {
      const [z, h, slots] = holdKeys(r.keyId);
      const reply = (await call(
        client,
        'admit',
        spendKey(r),
        z!,
        h!,
        slots!,
        now,
        now + ttlMs,
        r.holdId,
        r.amount,
        r.budget ?? -1,
        r.seed,
        Math.max(1, r.end - now) + SPEND_GRACE_MS,
        r.slots ?? -1,
      )) as [number, number, number];
      const [code, spent, reserved] = reply.map(Number) as [number, number, number];
      if (code === 0) return { ok: true, spent, reserved };
      return { ok: false, reason: code === 1 ? 'slots' : 'budget', spent, reserved };
    },
    async settle(hold, cost, seed, now) {
      const [z, h, slots] = holdKeys(hold.keyId);
      const total = await call(
        client,
        'settle',
        spendKey(hold),
        z!,
        h!,
        slots!,
        hold.holdId,
        cost,
        seed + cost,
        Math.max(1, hold.end - now) + SPEND_GRACE_MS,
      );
      return Number(total);
    },
    async lease(r, now, ttlMs) {
      const [z, h] = holdKeys(r.keyId);
      const reply = (await call(
        client,
        'lease',
        spendKey(r),
        z!,
        h!,
        now,
        now + ttlMs,
        r.leaseId,
        r.cost,
        r.budget,
        r.seed,
        Math.max(1, r.end - now) + SPEND_GRACE_MS,
        r.want,
        r.keep,
      )) as [number, number, number];
      const [spent, others, granted] = reply.map(Number) as [number, number, number];
      return { spent, others, granted };
    },
    async refresh(byKey, until) {
      // Nothing to refresh: a ping still tells whether Redis answers (admissions go back to it).
      if (byKey.size === 0) return void (await client.ping());
      const p = client.pipeline();
      for (const [keyId, ids] of byKey) {
        const [z, h, slots] = holdKeys(keyId);
        call(p, 'refresh', z!, slots!, h!, until, ...ids);
      }
      await p.exec();
    },
  };
}

/**
 * Time-sortable ids (ULID: 48-bit ms timestamp + 80 random bits, Crockford base32), so request-log ids sort
 * by arrival and cursor pagination can use them directly.
 */
import crypto from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

// One getRandomValues call per 256 ids instead of one randomBytes call per id (the proxy makes one per request).
const POOL = Buffer.alloc(10 * 256);
let poolOffset = POOL.length;
function random10(): Buffer {
  if (poolOffset + 10 > POOL.length) {
    crypto.getRandomValues(POOL);
    poolOffset = 0;
  }
  const out = POOL.subarray(poolOffset, poolOffset + 10);
  poolOffset += 10;
  return out;
}

/** Written in place, then read as one string: building it a character at a time made ~0.8 KB of garbage. */
const OUT = Buffer.alloc(26);
const ALPHABET = Buffer.from(CROCKFORD, 'latin1');

function writeTime(ms: number): void {
  let t = ms;
  for (let i = 9; i >= 0; i--) {
    OUT[i] = ALPHABET[t % 32]!;
    t = Math.floor(t / 32);
  }
}

export function newId(now = Date.now()): string {
  writeTime(now);
  const rnd = random10();
  // 80 bits → 16 base32 chars, 5 bits at a time.
  let acc = 0;
  let bits = 0;
  let o = 10;
  for (let i = 0; i < rnd.length; i++) {
    acc = ((acc << 8) | rnd[i]!) & 0xfff;
    bits += 8;
    while (bits >= 5) {
      OUT[o++] = ALPHABET[(acc >>> (bits - 5)) & 31]!;
      bits -= 5;
    }
  }
  return OUT.toString('latin1', 0, 26);
}

/**
 * A new id and its time as ISO-8601, from one clock reading: a log row's `created_at` is its id's time to
 * the millisecond, so the log can find rows by time through its id index (store/log-query.ts).
 */
export function newTimedId(): { id: string; at: string } {
  const now = Date.now();
  return { id: newId(now), at: new Date(now).toISOString() };
}

/** The smallest id newId makes at `ms` (clamped to what 48 bits hold): ids made at `ms` or later sort at or above it. */
export function idFloor(ms: number): string {
  writeTime(Math.min(Math.max(0, Math.floor(ms)), 2 ** 48 - 1));
  return OUT.toString('latin1', 0, 10) + '0000000000000000';
}

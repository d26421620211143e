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

export function newId(now = Date.now()): string {
  let ts = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    ts = CROCKFORD[t % 32]! + ts;
    t = Math.floor(t / 32);
  }
  const rnd = random10();
  let r = '';
  // 80 bits → 16 base32 chars, 5 bits at a time.
  let acc = 0;
  let bits = 0;
  for (const b of rnd) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      r += CROCKFORD[(acc >>> (bits - 5)) & 31]!;
      bits -= 5;
    }
  }
  return ts + r;
}

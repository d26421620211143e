/**
 * Time-sortable ids (ULID: 48-bit ms timestamp + 80 random bits, Crockford base32), so request-log ids sort
 * by arrival and cursor pagination can use them directly.
 */
import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function newId(now = Date.now()): string {
  let ts = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    ts = CROCKFORD[t % 32]! + ts;
    t = Math.floor(t / 32);
  }
  const rnd = randomBytes(10);
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

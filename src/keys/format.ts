/**
 * Key format: `kr_` + 43 base62 chars (32 random bytes) + 6 base62 chars of the CRC32 (IEEE) of
 * everything before them. The checksum lets us refuse garbage and typos without touching storage, and lets
 * secret scanners match `kr_[0-9A-Za-z]{49}` with few false positives.
 */
import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const PREFIX = 'kr_';
const BODY_LEN = 43;
const CRC_LEN = 6;
export const KEY_LENGTH = PREFIX.length + BODY_LEN + CRC_LEN;
export const KEY_PATTERN = /^kr_[0-9A-Za-z]{49}$/;

function toBase62(n: bigint, width: number): string {
  let s = '';
  while (n > 0n) {
    s = ALPHABET[Number(n % 62n)]! + s;
    n /= 62n;
  }
  return s.padStart(width, '0');
}

function checksum(prefixAndBody: string): string {
  return toBase62(BigInt(crc32(prefixAndBody)), CRC_LEN);
}

export function generateKey(): string {
  const body = toBase62(BigInt('0x' + randomBytes(32).toString('hex')), BODY_LEN);
  return PREFIX + body + checksum(PREFIX + body);
}

/** Format and checksum only: no lookup. */
export function isWellFormedKey(key: string): boolean {
  if (key.length !== KEY_LENGTH || !KEY_PATTERN.test(key)) return false;
  const head = key.slice(0, PREFIX.length + BODY_LEN);
  return checksum(head) === key.slice(PREFIX.length + BODY_LEN);
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** Display hint, e.g. `kr_ab12…wxyz`: enough to recognise a key, useless to an attacker. */
export function keyHint(key: string): string {
  return `${key.slice(0, 7)}…${key.slice(-4)}`;
}

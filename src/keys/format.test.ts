import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { generateKey, hashKey, isWellFormedKey, keyHint, KEY_PATTERN } from './format.js';

describe('key format', () => {
  it('generates kr_ + 49 base62 characters that pass the checksum', () => {
    for (let i = 0; i < 200; i++) {
      const k = generateKey();
      expect(k).toMatch(KEY_PATTERN);
      expect(isWellFormedKey(k)).toBe(true);
    }
  });

  it('ends with the CRC32 (IEEE) of everything before it, in 6 base62 digits', () => {
    const k = generateKey();
    const head = k.slice(0, 46);
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    const crc = [...k.slice(46)].reduce((n, c) => n * 62 + alphabet.indexOf(c), 0);
    expect(crc).toBe(crc32(head));
  });

  it('rejects any single-character change (typo) by checksum', () => {
    const k = generateKey();
    fc.assert(
      fc.property(fc.integer({ min: 3, max: k.length - 1 }), fc.constantFrom(...'0aZ9'), (pos, ch) => {
        fc.pre(k[pos] !== ch);
        expect(isWellFormedKey(k.slice(0, pos) + ch + k.slice(pos + 1))).toBe(false);
      }),
    );
  });

  it('rejects wrong prefix, length and alphabet without a lookup', () => {
    const k = generateKey();
    expect(isWellFormedKey('sk' + k.slice(2))).toBe(false);
    expect(isWellFormedKey(k + 'a')).toBe(false);
    expect(isWellFormedKey(k.slice(0, -1))).toBe(false);
    expect(isWellFormedKey(k.slice(0, 10) + '-' + k.slice(11))).toBe(false);
    expect(isWellFormedKey('')).toBe(false);
  });

  it('hashes with SHA-256 hex and hints without revealing the key', () => {
    const k = generateKey();
    expect(hashKey(k)).toMatch(/^[0-9a-f]{64}$/);
    expect(keyHint(k)).toBe(`${k.slice(0, 7)}…${k.slice(-4)}`);
  });
});

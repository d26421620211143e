import { StringDecoder } from 'node:string_decoder';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BodyPrefix } from './body-buffers.js';

describe('BodyPrefix', () => {
  it('keeps exactly the first `limit` bytes however the body is cut, and says whether there was more', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 300 }),
        fc.array(fc.nat(40), { maxLength: 30 }),
        fc.integer({ min: 1, max: 9000 }),
        (text, cuts, limit) => {
          const bytes = Buffer.from(text.repeat(1 + Math.floor(limit / 400)));
          const prefix = new BodyPrefix(limit);
          let at = 0;
          for (const n of cuts) {
            prefix.add(bytes.subarray(at, at + n));
            at += n;
          }
          prefix.add(bytes.subarray(at));
          const want = new StringDecoder('utf8').write(bytes.subarray(0, limit));
          expect(prefix.text()).toEqual({ text: want, truncated: bytes.length > limit });
          expect(prefix.size).toBe(bytes.length);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('holds its own copy of the bytes once a second piece has come', () => {
    const prefix = new BodyPrefix(8);
    const first = Buffer.from('abcd');
    const second = Buffer.from('efghij');
    prefix.add(first);
    prefix.add(second);
    first.fill('x');
    second.fill('y');
    expect(prefix.text()).toEqual({ text: 'abcdefgh', truncated: true });
    expect(new BodyPrefix(8).text()).toEqual({ text: '', truncated: false });
  });
});

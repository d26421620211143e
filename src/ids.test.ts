import { describe, expect, it } from 'vitest';
import { idFloor, newId, newTimedId } from './ids.js';

const CROCKFORD = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('newId', () => {
  it("encodes the time as the ULID spec's example does", () => {
    // github.com/ulid/spec: 01ARYZ6S41TSV4RRFFQ69G5FAV has the timestamp 1469918176385.
    expect(newId(1469918176385).slice(0, 10)).toBe('01ARYZ6S41');
    expect(newId(0).slice(0, 10)).toBe('0000000000');
    expect(newId(2 ** 48 - 1).slice(0, 10)).toBe('7ZZZZZZZZZ');
  });

  it('is 26 Crockford base32 characters, random after the time, and sorts by time', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => newId(1_700_000_000_000 + Math.floor(i / 10)));
    for (const id of ids) expect(id).toMatch(CROCKFORD);
    expect(new Set(ids).size).toBe(ids.length);
    const byTime = ids.filter((_, i) => i % 10 === 0);
    expect([...byTime].sort()).toEqual(byTime);
    // All 32 symbols appear in the random part: every 5-bit group is used.
    expect(new Set(ids.flatMap((id) => [...id.slice(10)])).size).toBe(32);
  });

  it('returns strings that do not change when the next id is made', () => {
    const a = newId(1);
    const copy = `${a}`;
    newId(2);
    expect(a).toBe(copy);
  });
});

describe('newTimedId and idFloor', () => {
  it('gives an id and an ISO time of the same millisecond', () => {
    for (let i = 0; i < 200; i++) {
      const { id, at } = newTimedId();
      expect(id >= idFloor(Date.parse(at)) && id < idFloor(Date.parse(at) + 1)).toBe(true);
    }
  });

  it('bounds every id of a millisecond: at or above its floor, below the next one', () => {
    const t = 1_764_000_000_123;
    const floor = idFloor(t);
    expect(floor).toBe(`${newId(t).slice(0, 10)}0000000000000000`);
    for (let i = 0; i < 1000; i++) {
      const id = newId(t);
      expect(id >= floor && id < idFloor(t + 1)).toBe(true);
      expect(newId(t - 1) < floor).toBe(true);
    }
    expect(idFloor(-5)).toBe('0'.repeat(26));
    expect(idFloor(2 ** 50)).toBe(`7ZZZZZZZZZ${'0'.repeat(16)}`);
  });
});

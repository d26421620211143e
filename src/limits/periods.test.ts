import { describe, expect, it } from 'vitest';
import { periodBounds, secondsUntil, waitInWords } from './periods.js';

describe('periodBounds', () => {
  it('gives the UTC day around an instant', () => {
    const at = Date.parse('2026-03-01T23:59:59.999Z');
    expect(periodBounds('day', at)).toEqual({
      start: Date.parse('2026-03-01T00:00:00Z'),
      end: Date.parse('2026-03-02T00:00:00Z'),
    });
  });

  it('gives the UTC calendar month, across a year end and a leap February', () => {
    expect(periodBounds('month', Date.parse('2026-12-31T12:00:00Z'))).toEqual({
      start: Date.parse('2026-12-01T00:00:00Z'),
      end: Date.parse('2027-01-01T00:00:00Z'),
    });
    expect(periodBounds('month', Date.parse('2028-02-29T00:00:00Z')).end).toBe(
      Date.parse('2028-03-01T00:00:00Z'),
    );
  });
});

describe('secondsUntil', () => {
  it('rounds up and never answers less than 1', () => {
    expect(secondsUntil(10_001, 0)).toBe(11);
    expect(secondsUntil(10, 10)).toBe(1);
    expect(secondsUntil(0, 10)).toBe(1);
  });
});

describe('waitInWords', () => {
  it('says a wait in its two largest units, never in thousands of seconds', () => {
    expect(waitInWords(54_419)).toBe('15 h 6 min');
    expect(waitInWords(45)).toBe('45 s');
    expect(waitInWords(200)).toBe('3 min 20 s');
    expect(waitInWords(3_600)).toBe('1 h');
    expect(waitInWords(2 * 86_400 + 4 * 3_600 + 59)).toBe('2 d 4 h');
    expect(waitInWords(0.2)).toBe('1 s');
  });
});

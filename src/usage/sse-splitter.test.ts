import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSseEvent, SseSplitter, type SseSegment } from './sse-splitter.js';

function split(chunks: Buffer[], max?: number, mode: 'clip' | 'pass' = 'clip'): SseSegment[] {
  const splitter = new SseSplitter(max, mode);
  const out: SseSegment[] = [];
  for (const c of chunks) splitter.push(c, (s) => out.push(s));
  splitter.end((s) => out.push(s));
  return out;
}

describe('SseSplitter', () => {
  it('loses and adds no byte, and finds the same events, however the input is cut', () => {
    const line = fc.constantFrom('data: x', 'data: é世🎉', 'event: e', ': c', 'data', '');
    const eol = fc.constantFrom('\n', '\r\n', '\r');
    fc.assert(
      fc.property(
        fc.array(fc.tuple(line, eol), { maxLength: 20 }),
        fc.array(fc.nat(50), { maxLength: 20 }),
        (lines, cuts) => {
          const bytes = Buffer.from(lines.map(([l, e]) => l + e).join(''));
          const chunks: Buffer[] = [];
          let at = 0;
          for (const n of cuts) {
            chunks.push(bytes.subarray(at, at + n));
            at += n;
          }
          chunks.push(bytes.subarray(at));
          const got = split(chunks);
          const whole = split([bytes]);
          expect(Buffer.concat(got.map((s) => s.raw)).equals(bytes)).toBe(true);
          const events = (segs: SseSegment[]) =>
            segs.filter((s) => s.isEvent).map((s) => parseSseEvent(s.raw));
          expect(events(got)).toEqual(events(whole));
        },
      ),
    );
  });

  it('parses event names and joins multi-line data with newlines', () => {
    const [seg] = split([Buffer.from('event: delta\r\ndata: a\r\ndata:b\r\nid: 1\r\n\r\n')]);
    expect(parseSseEvent(seg!.raw)).toEqual({ event: 'delta', data: 'a\nb', hasData: true });
  });

  it('keeps only the head and tail of an event past its size limit', () => {
    const big = `data: ${'x'.repeat(10_000)}"usage":{"a":1}\n\n`;
    const segs = split(
      Array.from({ length: 100 }, (_v, i) => Buffer.from(big.slice(i * 101, (i + 1) * 101))),
      1000,
    );
    expect(segs).toHaveLength(1);
    expect(segs[0]!.clipped).toBe(true);
    expect(segs[0]!.raw.length).toBeLessThanOrEqual(1200);
    expect(segs[0]!.raw.toString().endsWith('"usage":{"a":1}\n\n')).toBe(true);
    expect(segs[0]!.raw.toString().startsWith('data: xxx')).toBe(true);
  });

  it("in 'pass' mode, hands an event past its limit on in pieces as it comes, losing and adding no byte", () => {
    const line = fc.constantFrom('data: x', `data: ${'y'.repeat(300)}`, 'event: e', ': c', '');
    const eol = fc.constantFrom('\n', '\r\n', '\r');
    fc.assert(
      fc.property(
        fc.array(fc.tuple(line, eol), { maxLength: 30 }),
        fc.array(fc.nat(200), { maxLength: 20 }),
        (lines, cuts) => {
          const bytes = Buffer.from(lines.map(([l, e]) => l + e).join(''));
          const chunks: Buffer[] = [];
          let at = 0;
          for (const n of cuts) {
            chunks.push(bytes.subarray(at, at + n));
            at += n;
          }
          chunks.push(bytes.subarray(at));
          const got = split(chunks, 256, 'pass');
          expect(Buffer.concat(got.map((s) => s.raw)).equals(bytes)).toBe(true);
          // Whole events are never bigger than the limit (plus the chunk that ended them).
          for (const seg of got) if (!seg.passed) expect(seg.raw.length).toBeLessThanOrEqual(256 + 200);
        },
      ),
    );
  });

  it("in 'pass' mode, goes back to whole events after an oversized one", () => {
    const big = `data: ${'x'.repeat(10_000)}\n\n`;
    const small = 'data: {"a":1}\n\n';
    const bytes = Buffer.from(big + small);
    const segs = split(
      Array.from({ length: Math.ceil(bytes.length / 97) }, (_v, i) => bytes.subarray(i * 97, (i + 1) * 97)),
      1000,
      'pass',
    );
    const passed = segs.filter((s) => s.passed);
    expect(passed.length).toBeGreaterThan(50);
    expect(Math.max(...passed.map((s) => s.raw.length))).toBeLessThanOrEqual(1000 + 97);
    expect(Buffer.concat(passed.map((s) => s.raw)).toString()).toBe(big);
    expect(segs.at(-1)).toEqual({ raw: Buffer.from(small), isEvent: true, clipped: false });
  });
});

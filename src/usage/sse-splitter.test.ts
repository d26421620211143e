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

  it('parses every field layout as the line-splitting parse it replaced did', () => {
    // The previous implementation, kept as the oracle: split into lines, then field and value per line.
    const oracle = (raw: Buffer) => {
      let event = 'message';
      const data: string[] = [];
      for (const line of raw.toString('utf8').split(/\r\n|\r|\n/)) {
        if (line === '' || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
      }
      return { event, data: data.join('\n'), hasData: data.length > 0 };
    };
    const line = fc.constantFrom(
      'data: x',
      'data:x',
      'data:  two spaces',
      'data',
      'data:',
      'data: a:b: c',
      'event: e',
      'event:e2',
      'event',
      ': comment',
      ':',
      'id: 7',
      'retry: 10',
      'dataish: no',
      'eventual: no',
      'data é世🎉',
      'data: é世🎉',
      ' data: leading space',
      '',
    );
    const eol = fc.constantFrom('\n', '\r\n', '\r', '');
    fc.assert(
      fc.property(fc.array(fc.tuple(line, eol), { maxLength: 8 }), (lines) => {
        const raw = Buffer.from(lines.map(([l, e]) => l + e).join(''));
        expect(parseSseEvent(raw)).toEqual(oracle(raw));
      }),
      { numRuns: 2000 },
    );
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

import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createBodyDecoder, type BodyDecoder } from './decoder.js';

/** Writes a chunk and reads every decoded piece of it. */
function push(decoder: BodyDecoder, chunk: Buffer): Buffer[] {
  decoder.write(chunk);
  const out: Buffer[] = [];
  for (let piece = decoder.read(); piece; piece = decoder.read()) out.push(piece);
  return out;
}

function decodeAll(encoding: string, chunks: Buffer[]): Buffer {
  const decoder = createBodyDecoder(encoding)!;
  const out: Buffer[] = [];
  for (const c of chunks) out.push(...push(decoder, c));
  decoder.end();
  for (let piece = decoder.read(); piece; piece = decoder.read()) out.push(piece);
  decoder.close();
  return Buffer.concat(out);
}

const sample = Buffer.from(
  Array.from({ length: 3000 }, (_v, i) => `line ${i} é世 ${(i * 7919) % 1013}\n`).join(''),
);

describe('createBodyDecoder', () => {
  it('decodes gzip, zlib deflate, raw deflate and br fed one byte at a time', () => {
    for (const [encoding, packed] of [
      ['gzip', zlib.gzipSync(sample)],
      ['deflate', zlib.deflateSync(sample)],
      ['deflate', zlib.deflateRawSync(sample)],
      ['br', zlib.brotliCompressSync(sample)],
    ] as const) {
      const bytes = Array.from(packed, (_b, i) => packed.subarray(i, i + 1));
      expect(decodeAll(encoding, bytes).equals(sample), encoding).toBe(true);
    }
  });

  it('yields decoded bytes as soon as a flushed block arrives, before the body ends', async () => {
    const half = sample.subarray(0, 1000);
    for (const [encoding, compressor] of [
      ['gzip', zlib.createGzip()],
      ['br', zlib.createBrotliCompress()],
    ] as const) {
      // What a streaming server has sent after flushing its first event: no end of stream yet.
      const sent: Buffer[] = [];
      compressor.on('data', (b: Buffer) => sent.push(b));
      compressor.write(half);
      await new Promise<void>((resolve) => compressor.flush(() => resolve()));
      const decoder = createBodyDecoder(encoding)!;
      expect(Buffer.concat(push(decoder, Buffer.concat(sent))).equals(half), encoding).toBe(true);
      compressor.destroy();
    }
  });

  it('decodes concatenated gzip members and treats identity and unknown codings apart', () => {
    const twice = Buffer.concat([zlib.gzipSync(sample), zlib.gzipSync(sample)]);
    expect(decodeAll('gzip', [twice]).equals(Buffer.concat([sample, sample]))).toBe(true);
    expect(decodeAll('identity', [sample]).equals(sample)).toBe(true);
    expect(createBodyDecoder(undefined)).not.toBeNull();
    expect(createBodyDecoder('compress')).toBeNull();
    expect(createBodyDecoder('gzip, br')).toBeNull();
  });

  it('throws on corrupt input rather than returning garbage', () => {
    expect(() => push(createBodyDecoder('gzip')!, Buffer.from('plain text, not gzip'))).toThrow();
    expect(() => push(createBodyDecoder('br')!, Buffer.from('plain text, not brotli at all'))).toThrow();
    expect(() => push(createBodyDecoder('zstd')!, Buffer.from('plain text, not zstd'))).toThrow();
  });

  it('hands a decompression bomb out piece by piece, never all at once', () => {
    // ~1 KB of brotli or gzip that decodes to 256 MiB of zeros.
    const zeros = Buffer.alloc(256 * 1024 * 1024);
    for (const [encoding, bomb] of [
      ['br', zlib.brotliCompressSync(zeros)],
      ['gzip', zlib.gzipSync(zeros, { level: 9 })],
    ] as const) {
      const decoder = createBodyDecoder(encoding)!;
      decoder.write(bomb);
      let total = 0;
      for (let i = 0; i < 1000; i++) {
        const piece = decoder.read();
        expect(piece).not.toBeNull();
        expect(piece!.length).toBeLessThanOrEqual(16 * 1024);
        total += piece!.length;
      }
      expect(total).toBeGreaterThan(1024 * 1024);
      decoder.close();
      expect(decoder.read()).toBeNull();
    }
  });
});

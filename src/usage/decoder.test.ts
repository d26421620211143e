import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createBodyDecoder } from './decoder.js';

function decodeAll(encoding: string, chunks: Buffer[]): Buffer {
  const decoder = createBodyDecoder(encoding)!;
  const out: Buffer[] = [];
  for (const c of chunks) out.push(...decoder.push(c));
  out.push(...decoder.end());
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
      expect(Buffer.concat(decoder.push(Buffer.concat(sent))).equals(half), encoding).toBe(true);
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
    expect(() => createBodyDecoder('gzip')!.push(Buffer.from('plain text, not gzip'))).toThrow();
    expect(() => createBodyDecoder('br')!.push(Buffer.from('plain text, not brotli at all'))).toThrow();
    expect(() => createBodyDecoder('zstd')!.push(Buffer.from('plain text, not zstd'))).toThrow();
  });
});

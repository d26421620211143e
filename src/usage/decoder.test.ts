import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createBodyDecoder, type BodyDecoder } from './decoder.js';

/**
 * Reads every piece the decoder yields as it becomes ready; `failed` rejects with the decoder's error.
 * Decoding runs off the event loop, so pieces come later than the writes.
 */
function collect(decoder: BodyDecoder): { out: Buffer[]; failed: Promise<never> } {
  const out: Buffer[] = [];
  let fail: (err: unknown) => void = () => undefined;
  const failed = new Promise<never>((_resolve, reject) => (fail = reject));
  failed.catch(() => undefined);
  const drain = () => {
    try {
      for (let piece = decoder.read(); piece; piece = decoder.read()) out.push(piece);
    } catch (err) {
      fail(err);
    }
  };
  decoder.onReadable(drain);
  return { out, failed };
}

function readAll(decoder: BodyDecoder, out: Buffer[]): void {
  for (let piece = decoder.read(); piece; piece = decoder.read()) out.push(piece);
}

/** Writes a chunk and waits until it is decoded, reading meanwhile (an identity piece is ready at once). */
async function push(decoder: BodyDecoder, chunk: Buffer, out: Buffer[], failed: Promise<never>) {
  const consumed = new Promise<void>((resolve) => decoder.write(chunk, resolve));
  readAll(decoder, out);
  await Promise.race([consumed, failed]);
  readAll(decoder, out);
}

async function decodeAll(encoding: string, chunks: Buffer[]): Promise<Buffer> {
  const decoder = createBodyDecoder(encoding)!;
  const { out, failed } = collect(decoder);
  for (const c of chunks) await push(decoder, c, out, failed);
  await Promise.race([decoder.end(), failed]);
  readAll(decoder, out);
  decoder.close();
  return Buffer.concat(out);
}

const sample = Buffer.from(
  Array.from({ length: 3000 }, (_v, i) => `line ${i} é世 ${(i * 7919) % 1013}\n`).join(''),
);

describe('createBodyDecoder', () => {
  it('decodes gzip, zlib deflate, raw deflate and br fed one byte at a time', async () => {
    for (const [encoding, packed] of [
      ['gzip', zlib.gzipSync(sample)],
      ['deflate', zlib.deflateSync(sample)],
      ['deflate', zlib.deflateRawSync(sample)],
      ['br', zlib.brotliCompressSync(sample)],
    ] as const) {
      const bytes = Array.from(packed, (_b, i) => packed.subarray(i, i + 1));
      expect((await decodeAll(encoding, bytes)).equals(sample), encoding).toBe(true);
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
      const { out, failed } = collect(decoder);
      await push(decoder, Buffer.concat(sent), out, failed);
      await new Promise((r) => setTimeout(r, 50)); // the last piece's callback
      expect(Buffer.concat(out).equals(half), encoding).toBe(true);
      decoder.close();
      compressor.destroy();
    }
  });

  it('decodes concatenated gzip members and treats identity and unknown codings apart', async () => {
    const twice = Buffer.concat([zlib.gzipSync(sample), zlib.gzipSync(sample)]);
    expect((await decodeAll('gzip', [twice])).equals(Buffer.concat([sample, sample]))).toBe(true);
    expect((await decodeAll('identity', [sample])).equals(sample)).toBe(true);
    expect(createBodyDecoder(undefined)).not.toBeNull();
    expect(createBodyDecoder('compress')).toBeNull();
    expect(createBodyDecoder('gzip, br')).toBeNull();
  });

  it('throws on corrupt input rather than returning garbage', async () => {
    await expect(decodeAll('gzip', [Buffer.from('plain text, not gzip')])).rejects.toThrow();
    await expect(decodeAll('br', [Buffer.from('plain text, not brotli at all')])).rejects.toThrow();
    await expect(decodeAll('zstd', [Buffer.from('plain text, not zstd')])).rejects.toThrow();
  });

  it('hands a decompression bomb out piece by piece, never all at once', async () => {
    // ~1 KB of brotli or gzip that decodes to 256 MiB of zeros.
    const zeros = Buffer.alloc(256 * 1024 * 1024);
    for (const [encoding, bomb] of [
      ['br', zlib.brotliCompressSync(zeros)],
      ['gzip', zlib.gzipSync(zeros, { level: 9 })],
    ] as const) {
      const decoder = createBodyDecoder(encoding)!;
      let total = 0;
      let pieces = 0;
      await new Promise<void>((resolve) => {
        // Read one piece per notice, on a later turn: what waits unread stays a couple of pieces.
        decoder.onReadable(() =>
          setImmediate(() => {
            const piece = decoder.read();
            if (!piece || pieces >= 1000) return;
            expect(piece.length).toBeLessThanOrEqual(16 * 1024);
            total += piece.length;
            if (++pieces === 1000) resolve();
          }),
        );
        decoder.write(bomb);
      });
      expect(total).toBeGreaterThan(1024 * 1024);
      decoder.close();
      expect(decoder.read()).toBeNull();
    }
  });
});

/**
 * Incremental, synchronous decoding of a response body's `content-encoding`, so the usage tap can parse a
 * compressed stream chunk by chunk and still answer `finish()` at once. node:zlib's public streams are
 * asynchronous (the last chunk would still be in flight at finish), so gzip/deflate/br drive the zlib
 * handle's synchronous write directly, the way node:zlib's own `*Sync` helpers do but without closing
 * after one call. A start-up self-test guards that; if it ever fails (a future Node), we fall back to
 * keeping the compressed bytes and decoding them in one go at the end. zstd uses fzstd (pure JS), since
 * Node 20's zlib has none.
 */
import zlib from 'node:zlib';
import { Decompress as ZstdDecompress } from 'fzstd';

/**
 * Pull-style, so no caller ever holds more than one piece of output: a few hundred compressed bytes can
 * expand to gigabytes (a decompression bomb), and all of a chunk's output at once would be all of that.
 */
export interface BodyDecoder {
  /** The next compressed chunk; read() until null before writing the next one. */
  write(chunk: Buffer): void;
  /** The next piece of decoded output (at most 16 KiB from zlib), or null when the input written so far is used up. Throws on corrupt input. */
  read(): Buffer | null;
  /** End of the body: read() then yields whatever is left (a truncated body yields what could be decoded). */
  end(): void;
  /** Stops decoding and frees the decoder's memory; read() yields null from now on. */
  close(): void;
}

type ZlibKind = 'gzip' | 'deflate' | 'deflate-raw' | 'br';

interface ZlibHandle {
  writeSync(
    flush: number,
    input: Buffer,
    inOff: number,
    inLen: number,
    out: Buffer,
    outOff: number,
    outLen: number,
  ): void;
  onerror: (message: string, errno: number) => void;
}
interface ZlibInternals {
  _handle: ZlibHandle | null;
  _writeState: Uint32Array;
  close(): void;
}

const OUT_CHUNK = 16 * 1024;
const FALLBACK_MAX_BYTES = 32 * 1024 * 1024;

function createZlibEngine(
  kind: ZlibKind,
): zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress {
  if (kind === 'gzip') return zlib.createGunzip();
  if (kind === 'deflate') return zlib.createInflate();
  if (kind === 'deflate-raw') return zlib.createInflateRaw();
  return zlib.createBrotliDecompress();
}

function flushFlag(kind: ZlibKind): number {
  return kind === 'br' ? zlib.constants.BROTLI_OPERATION_FLUSH : zlib.constants.Z_SYNC_FLUSH;
}

/** Sync incremental decoder on the zlib handle; null when the internals are not what we expect. */
function createHandleDecoder(kind: ZlibKind): BodyDecoder | null {
  const engine = createZlibEngine(kind) as unknown as ZlibInternals;
  const handle = engine._handle;
  const state = engine._writeState;
  if (!handle || typeof handle.writeSync !== 'function' || !(state instanceof Uint32Array)) {
    engine.close();
    return null;
  }
  let error: Error | null = null;
  handle.onerror = (message: string) => {
    error = new Error(`${kind} decode failed: ${message}`);
  };
  const flush = flushFlag(kind);
  const scratch = Buffer.allocUnsafe(OUT_CHUNK);
  let closed = false;
  const close = () => {
    if (!closed) {
      closed = true;
      engine.close();
    }
  };
  let input: Buffer | null = null;
  let inOff = 0;
  let availIn = 0;
  return {
    write(chunk) {
      if (closed) throw new Error(`${kind} decoder is closed`);
      input = input && availIn > 0 ? Buffer.concat([input.subarray(inOff, inOff + availIn), chunk]) : chunk;
      inOff = 0;
      availIn = input.length;
    },
    read() {
      if (closed || !input) return null;
      handle.writeSync(flush, input, inOff, availIn, scratch, 0, OUT_CHUNK);
      if (error) {
        close();
        throw error;
      }
      const availOutAfter = state[0] ?? 0;
      const availInAfter = state[1] ?? 0;
      const have = OUT_CHUNK - availOutAfter;
      inOff += availIn - availInAfter;
      availIn = availInAfter;
      // Output space left over means zlib consumed all it could; otherwise there is more output to come.
      if (availOutAfter !== 0) input = null;
      return have > 0 ? Buffer.from(scratch.subarray(0, have)) : null;
    },
    end() {
      // Everything written has been read: nothing is held back past a sync flush.
    },
    close,
  };
}

/** Public-API fallback: keep the compressed bytes (bounded) and decode once at the end. */
function createBufferingDecoder(kind: ZlibKind): BodyDecoder {
  let parts: Buffer[] = [];
  let size = 0;
  let out: Buffer | null = null;
  return {
    write(chunk) {
      if (size + chunk.length > FALLBACK_MAX_BYTES) throw new Error('compressed body too large to decode');
      parts.push(chunk);
      size += chunk.length;
    },
    read() {
      const piece = out;
      out = null;
      return piece;
    },
    end() {
      const all = Buffer.concat(parts, size);
      parts = [];
      const opts = { finishFlush: flushFlag(kind), maxOutputLength: FALLBACK_MAX_BYTES };
      if (kind === 'gzip') out = zlib.gunzipSync(all, opts);
      else if (kind === 'deflate') out = zlib.inflateSync(all, opts);
      else if (kind === 'deflate-raw') out = zlib.inflateRawSync(all, opts);
      else out = zlib.brotliDecompressSync(all, opts);
    },
    close() {
      parts = [];
      out = null;
    },
  };
}

function checkHandleDecoding(): boolean {
  try {
    const sample = Buffer.from('keyrelay self-test '.repeat(64));
    for (const [kind, packed] of [
      ['gzip', zlib.gzipSync(sample)],
      ['br', zlib.brotliCompressSync(sample)],
    ] as const) {
      const decoder = createHandleDecoder(kind);
      if (!decoder) return false;
      const out: Buffer[] = [];
      for (let i = 0; i < packed.length; i += 7) {
        decoder.write(packed.subarray(i, i + 7));
        for (let piece = decoder.read(); piece; piece = decoder.read()) out.push(piece);
      }
      decoder.end();
      decoder.close();
      if (!Buffer.concat(out).equals(sample)) return false;
    }
    return true;
  } catch {
    return false;
  }
}

const handleDecodingWorks = checkHandleDecoding();

function createZlibDecoder(kind: ZlibKind): BodyDecoder {
  return (handleDecodingWorks && createHandleDecoder(kind)) || createBufferingDecoder(kind);
}

/** HTTP `deflate` should be zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw deflate. */
function createDeflateDecoder(): BodyDecoder {
  let inner: BodyDecoder | null = null;
  let head: Buffer | null = null;
  let closed = false;
  return {
    write(chunk) {
      if (inner) return inner.write(chunk);
      head = head ? Buffer.concat([head, chunk]) : chunk;
      if (head.length < 2 || closed) return;
      const b0 = head[0] ?? 0;
      const b1 = head[1] ?? 0;
      const zlibWrapped = (b0 & 0x0f) === 8 && (b0 * 256 + b1) % 31 === 0;
      inner = createZlibDecoder(zlibWrapped ? 'deflate' : 'deflate-raw');
      inner.write(head);
      head = null;
    },
    read: () => inner?.read() ?? null,
    end: () => inner?.end(),
    close() {
      closed = true;
      head = null;
      inner?.close();
    },
  };
}

/**
 * fzstd decodes all of what it is given at once; fed in small slices, one read() produces at most the
 * blocks that slice completes (a block decodes to 128 KiB at most; an RLE block takes 4 bytes).
 */
const ZSTD_SLICE = 64;

function createZstdDecoder(): BodyDecoder {
  let out: Buffer[] = [];
  let input: Buffer | null = null;
  let closed = false;
  const decompress = new ZstdDecompress((data: Uint8Array) => {
    // fzstd may reuse its window buffer: copy.
    out.push(Buffer.from(data));
  });
  return {
    write(chunk) {
      input = input ? Buffer.concat([input, chunk]) : chunk;
    },
    read() {
      while (out.length === 0 && input && !closed) {
        const slice = input.subarray(0, ZSTD_SLICE);
        input = input.length > ZSTD_SLICE ? input.subarray(ZSTD_SLICE) : null;
        decompress.push(slice);
      }
      return out.shift() ?? null;
    },
    end() {},
    close() {
      closed = true;
      input = null;
      out = [];
    },
  };
}

/** The identity "decoder": each chunk read back once as it is. */
function createIdentityDecoder(): BodyDecoder {
  let pending: Buffer | null = null;
  return {
    write(chunk) {
      pending = chunk;
    },
    read() {
      const piece = pending;
      pending = null;
      return piece;
    },
    end() {},
    close() {
      pending = null;
    },
  };
}

/** The usual case (no content-encoding), answered without splitting the header. */
function isIdentity(contentEncoding: string | undefined): boolean {
  return contentEncoding === undefined || contentEncoding === '' || contentEncoding === 'identity';
}

/** null when the encoding is unknown (e.g. `compress`): the body cannot be read. */
export function createBodyDecoder(contentEncoding: string | undefined): BodyDecoder | null {
  if (isIdentity(contentEncoding)) return createIdentityDecoder();
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return createIdentityDecoder();
  if (codings.length > 1) return null; // stacked codings: never seen from these providers
  switch (codings[0]) {
    case 'gzip':
    case 'x-gzip':
      return createZlibDecoder('gzip');
    case 'deflate':
      return createDeflateDecoder();
    case 'br':
      return createZlibDecoder('br');
    case 'zstd':
      return createZstdDecoder();
    default:
      return null;
  }
}

/** Whether a content-encoding is one the decoders above undo (not identity). */
export function isCompressed(contentEncoding: string | undefined): boolean {
  if (isIdentity(contentEncoding)) return false;
  return (contentEncoding ?? '').split(',').some((c) => !['', 'identity'].includes(c.trim().toLowerCase()));
}

/** Whether createUsageStripper can decode this coding (and so send identity bytes on). */
export function isDecodableEncoding(contentEncoding: string | undefined): boolean {
  return createBodyDecoder(contentEncoding) !== null;
}

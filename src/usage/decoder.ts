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

export interface BodyDecoder {
  /** Decoded bytes for this chunk (possibly none yet). Throws on corrupt input. */
  push(chunk: Buffer): Buffer[];
  /** Whatever is left, at the end of the body (a truncated body yields what could be decoded). */
  end(): Buffer[];
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
  return {
    push(chunk) {
      if (closed) throw new Error(`${kind} decoder is closed`);
      const out: Buffer[] = [];
      let inOff = 0;
      let availIn = chunk.length;
      for (;;) {
        handle.writeSync(flush, chunk, inOff, availIn, scratch, 0, OUT_CHUNK);
        if (error) {
          close();
          throw error;
        }
        const availOutAfter = state[0] ?? 0;
        const availInAfter = state[1] ?? 0;
        const have = OUT_CHUNK - availOutAfter;
        if (have > 0) out.push(Buffer.from(scratch.subarray(0, have)));
        // Output space left over means zlib consumed all it could; otherwise go round for more output.
        if (availOutAfter !== 0) break;
        inOff += availIn - availInAfter;
        availIn = availInAfter;
      }
      return out;
    },
    end() {
      close();
      return [];
    },
  };
}

/** Public-API fallback: keep the compressed bytes (bounded) and decode once at the end. */
function createBufferingDecoder(kind: ZlibKind): BodyDecoder {
  const parts: Buffer[] = [];
  let size = 0;
  return {
    push(chunk) {
      if (size + chunk.length > FALLBACK_MAX_BYTES) throw new Error('compressed body too large to decode');
      parts.push(chunk);
      size += chunk.length;
      return [];
    },
    end() {
      const all = Buffer.concat(parts, size);
      const opts = { finishFlush: flushFlag(kind) };
      if (kind === 'gzip') return [zlib.gunzipSync(all, opts)];
      if (kind === 'deflate') return [zlib.inflateSync(all, opts)];
      if (kind === 'deflate-raw') return [zlib.inflateRawSync(all, opts)];
      return [zlib.brotliDecompressSync(all, opts)];
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
      for (let i = 0; i < packed.length; i += 7) out.push(...decoder.push(packed.subarray(i, i + 7)));
      out.push(...decoder.end());
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
  return {
    push(chunk) {
      if (!inner) {
        head = head ? Buffer.concat([head, chunk]) : chunk;
        if (head.length < 2) return [];
        const b0 = head[0] ?? 0;
        const b1 = head[1] ?? 0;
        const zlibWrapped = (b0 & 0x0f) === 8 && (b0 * 256 + b1) % 31 === 0;
        inner = createZlibDecoder(zlibWrapped ? 'deflate' : 'deflate-raw');
        const first = head;
        head = null;
        return inner.push(first);
      }
      return inner.push(chunk);
    },
    end() {
      if (!inner) return [];
      return inner.end();
    },
  };
}

function createZstdDecoder(): BodyDecoder {
  let out: Buffer[] = [];
  const decompress = new ZstdDecompress((data: Uint8Array) => {
    // fzstd may reuse its window buffer: copy.
    out.push(Buffer.from(data));
  });
  return {
    push(chunk) {
      decompress.push(chunk);
      const produced = out;
      out = [];
      return produced;
    },
    end() {
      const produced = out;
      out = [];
      return produced;
    },
  };
}

const identity: BodyDecoder = { push: (chunk) => [chunk], end: () => [] };

/** null when the encoding is unknown (e.g. `compress`): the body cannot be read. */
export function createBodyDecoder(contentEncoding: string | undefined): BodyDecoder | null {
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return identity;
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

/** Whether createUsageStripper can decode this coding (and so send identity bytes on). */
export function isDecodableEncoding(contentEncoding: string | undefined): boolean {
  return createBodyDecoder(contentEncoding) !== null;
}

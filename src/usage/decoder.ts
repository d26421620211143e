/**
 * Incremental decoding of a response body's `content-encoding`, so the usage tap can read a compressed body
 * as it passes. gzip/deflate/br run in node:zlib's streams, on libuv's thread pool: a decompression bomb
 * costs the event loop one callback per 16 KiB piece, never a long stall. zstd uses fzstd (pure JS, Node 20's
 * zlib has none), fed in small slices with a turn given back to the loop between batches.
 */
import { Transform } from 'node:stream';
import zlib from 'node:zlib';
import { Decompress as ZstdDecompress } from 'fzstd';

/**
 * Pull-style, so no caller ever holds more than a couple of pieces of output: a few hundred compressed bytes
 * can expand to gigabytes (a decompression bomb), and all of it at once would be all of that. Decoding waits
 * while pieces are left unread.
 */
export interface BodyDecoder {
  /** The next compressed chunk; `consumed` is called once it is decoded (its output may be waiting to be read). */
  write(chunk: Buffer, consumed?: () => void): void;
  /**
   * The next piece of decoded output (at most 16 KiB from zlib), or null when none is ready yet. Throws on
   * corrupt input.
   */
  read(): Buffer | null;
  /** `listener` is called whenever read() may yield a piece (or throw) again. */
  onReadable(listener: () => void): void;
  /**
   * End of the body. Resolves once the rest is decoded (a truncated body yields what could be decoded) and
   * at most the last pieces wait to be read; rejects on corrupt input.
   */
  end(): Promise<void>;
  /** Stops decoding and frees the decoder's memory; read() yields null from now on. */
  close(): void;
}

type ZlibKind = 'gzip' | 'deflate' | 'deflate-raw' | 'br';

/** Decoded pieces waiting to be read before the decoder pauses: one being read, one ready. */
const QUEUED_PIECES = 2;

function createZlibEngine(kind: ZlibKind): Transform {
  // Flushing (rather than finishing) at the end: a truncated body yields what it holds, not an error.
  const sync = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  if (kind === 'gzip') return zlib.createGunzip(sync);
  if (kind === 'deflate') return zlib.createInflate(sync);
  if (kind === 'deflate-raw') return zlib.createInflateRaw(sync);
  return zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
}

/** A BodyDecoder over a decoding stream, created from the body's first bytes (`minHead` of them). */
class StreamDecoder implements BodyDecoder {
  private engine: Transform | null = null;
  private head: Buffer | null = null;
  private queue: Buffer[] = [];
  private error: Error | null = null;
  private listener: (() => void) | null = null;
  private closed = false;

  constructor(
    private readonly create: (head: Buffer) => Transform,
    private readonly minHead = 0,
  ) {}

  write(chunk: Buffer, consumed?: () => void): void {
    if (this.closed) throw new Error('decoder is closed');
    if (!this.engine) {
      this.head = this.head ? Buffer.concat([this.head, chunk]) : chunk;
      if (this.head.length < this.minHead) return void consumed?.();
      chunk = this.head;
      this.head = null;
      this.start(this.create(chunk));
    }
    // On an error `consumed` never comes: read() throws it instead.
    this.engine!.write(chunk, (err) => {
      if (!err) consumed?.();
    });
  }

  private start(engine: Transform): void {
    this.engine = engine;
    engine.on('data', (piece: Buffer) => {
      this.queue.push(piece);
      if (this.queue.length >= QUEUED_PIECES) engine.pause();
      this.listener?.();
    });
    engine.on('error', (err: Error) => {
      this.error ??= err;
      this.listener?.();
    });
  }

  read(): Buffer | null {
    if (this.error) throw this.error;
    const piece = this.queue.shift() ?? null;
    if (this.engine && !this.closed && this.queue.length < QUEUED_PIECES) this.engine.resume();
    return piece;
  }

  onReadable(listener: () => void): void {
    this.listener = listener;
  }

  end(): Promise<void> {
    if (!this.engine && this.head && !this.closed) this.start(this.create(this.head));
    const engine = this.engine;
    if (this.error) return Promise.reject(this.error);
    if (!engine || this.closed || engine.readableEnded) return Promise.resolve();
    return new Promise((resolve, reject) => {
      engine.once('end', resolve);
      engine.once('close', resolve); // closed (or stopped) before the end: what was read is all there is
      engine.once('error', reject);
      engine.end();
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.head = null;
    this.engine?.destroy();
  }
}

function createZlibDecoder(kind: ZlibKind): BodyDecoder {
  return new StreamDecoder(() => createZlibEngine(kind));
}

/** HTTP `deflate` should be zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw deflate. */
function createDeflateDecoder(): BodyDecoder {
  return new StreamDecoder((head) => {
    const b0 = head[0] ?? 0;
    const b1 = head[1] ?? 0;
    const zlibWrapped = (b0 & 0x0f) === 8 && (b0 * 256 + b1) % 31 === 0;
    return createZlibEngine(zlibWrapped ? 'deflate' : 'deflate-raw');
  }, 2);
}

/**
 * fzstd decodes all of what it is given at once; fed in small slices, one slice produces at most the blocks
 * it completes (a block decodes to 128 KiB at most; an RLE block takes 4 bytes).
 */
const ZSTD_SLICE = 64;
/** Decoded bytes per event-loop turn at most (~1 ms of fzstd), so a zstd bomb never stalls the loop. */
const ZSTD_TURN_BYTES = 256 * 1024;

/** A zstd decoding stream over fzstd: paced by its reader, a turn given back to the loop between batches. */
function createZstdEngine(): Transform {
  let produced = 0;
  let full = false;
  let waiting: (() => void) | null = null;
  const engine = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      let off = 0;
      const step = () => {
        if (engine.destroyed) return;
        let budget = ZSTD_TURN_BYTES;
        try {
          while (off < chunk.length) {
            const slice = chunk.subarray(off, off + ZSTD_SLICE);
            off += slice.length;
            produced = 0;
            full = false;
            decompress.push(slice);
            budget -= produced;
            if (full) return void (waiting = step);
            if (budget <= 0) return void setImmediate(step);
          }
        } catch (err) {
          return callback(err instanceof Error ? err : new Error(String(err)));
        }
        callback();
      };
      step();
    },
  });
  const decompress = new ZstdDecompress((data: Uint8Array) => {
    produced += data.length;
    // fzstd may reuse its window buffer: copy.
    if (!engine.push(Buffer.from(data))) full = true;
  });
  // Transform reads on only once a chunk is done; mid-chunk, the reader's read resumes the decoding.
  const transformRead = engine._read.bind(engine);
  engine._read = (size: number) => {
    const next = waiting;
    waiting = null;
    if (next) next();
    else transformRead(size);
  };
  return engine;
}

function createZstdDecoder(): BodyDecoder {
  return new StreamDecoder(() => createZstdEngine());
}

/** The identity "decoder": each chunk read back once as it is. */
function createIdentityDecoder(): BodyDecoder {
  let pending: Buffer | null = null;
  let onConsumed: (() => void) | undefined;
  return {
    write(chunk, consumed) {
      pending = chunk;
      onConsumed = consumed;
    },
    read() {
      const piece = pending;
      const consumed = onConsumed;
      pending = null;
      onConsumed = undefined;
      // Later, not now: the writer's next chunk must not overtake this piece.
      if (consumed) queueMicrotask(consumed);
      return piece;
    },
    onReadable() {},
    end: () => Promise.resolve(),
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

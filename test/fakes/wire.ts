import { spawnSync } from 'node:child_process';
import type { ServerResponse } from 'node:http';
import zlib from 'node:zlib';
import type { RenderedResponse } from './render.js';
import type { FakeEncoding, Scenario } from './scenario.js';

export type SendOutcome = 'complete' | 'stalled' | 'dropped' | 'aborted';

/** Bytes of a rendered response as they go on the wire: one entry per piece, after encoding. */
export async function encodePieces(pieces: string[], encoding: FakeEncoding | undefined): Promise<Buffer[]> {
  const raw = pieces.map((p) => Buffer.from(p, 'utf8'));
  if (encoding === undefined) return raw;
  // Node 20's zlib has no zstd; the zstd CLI emits one frame per piece, and concatenated frames are
  // a valid zstd stream (RFC 8878 §3.1).
  if (encoding === 'zstd') return raw.map(compressZstd);
  const z =
    encoding === 'gzip'
      ? zlib.createGzip()
      : encoding === 'deflate'
        ? zlib.createDeflate()
        : zlib.createBrotliCompress();
  let pending: Buffer[] = [];
  z.on('data', (b: Buffer) => pending.push(b));
  const take = (): Buffer => {
    const out = Buffer.concat(pending);
    pending = [];
    return out;
  };
  // A sync flush after each piece mirrors an upstream that compresses a stream event by event.
  const out: Buffer[] = [];
  for (const piece of raw) {
    z.write(piece);
    await new Promise<void>((resolve) => z.flush(resolve));
    out.push(take());
  }
  await new Promise<void>((resolve, reject) => {
    z.once('end', resolve);
    z.once('error', reject);
    z.end();
  });
  const tail = take();
  if (out.length === 0) out.push(tail);
  else out[out.length - 1] = Buffer.concat([out[out.length - 1]!, tail]);
  return out;
}

function compressZstd(buf: Buffer): Buffer {
  const r = spawnSync('zstd', ['-q', '-c', '-3'], { input: buf });
  if (r.status !== 0) throw new Error(`zstd failed: ${r.stderr.toString()}`);
  return r.stdout;
}

function waitOrClose(res: ServerResponse, ms: number): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timeout);
      clearImmediate(immediate);
      res.off('close', done);
      resolve();
    };
    const timeout = ms > 0 ? setTimeout(done, ms) : undefined;
    const immediate = ms > 0 ? undefined : setImmediate(done);
    res.once('close', done);
  });
}

/** Resolves true once the chunk is handed to the socket, false if the connection went away first. */
function writeChunk(res: ServerResponse, chunk: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = (): void => resolve(false);
    res.once('close', onClose);
    res.write(chunk, (err) => {
      res.off('close', onClose);
      resolve(err == null);
    });
  });
}

/**
 * Writes a rendered response as the scenario asks; `onWrite` sees every byte that reached the socket.
 * Resolves once the response is finished, stalled until the client leaves, dropped, or aborted.
 */
export async function sendRendered(
  res: ServerResponse,
  rendered: RenderedResponse,
  scenario: Scenario,
  onWrite: (bytes: Buffer) => void,
  onDrop: () => void,
): Promise<SendOutcome> {
  const encoded = await encodePieces(
    rendered.pieces,
    rendered.pieces.length > 0 ? scenario.encoding : undefined,
  );
  if (scenario.firstByteDelayMs > 0) await waitOrClose(res, scenario.firstByteDelayMs);
  if (res.destroyed) return 'aborted';
  res.statusCode = rendered.status;
  for (const [k, v] of Object.entries({ ...rendered.headers, ...scenario.setHeaders })) res.setHeader(k, v);
  if (scenario.encoding !== undefined && rendered.pieces.length > 0)
    res.setHeader('content-encoding', scenario.encoding);
  if (!rendered.stream)
    res.setHeader(
      'content-length',
      encoded.reduce((n, b) => n + b.length, 0),
    );
  res.socket?.setNoDelay(true);
  res.flushHeaders();
  for (const [i, piece] of encoded.entries()) {
    if (scenario.stallAfterEvents === i) {
      await new Promise<void>((resolve) => (res.destroyed ? resolve() : res.once('close', () => resolve())));
      return 'stalled';
    }
    if (scenario.dropAfterEvents === i) {
      onDrop();
      res.socket?.destroy();
      return 'dropped';
    }
    if (i > 0 && scenario.eventDelayMs > 0) await waitOrClose(res, scenario.eventDelayMs);
    const size = scenario.chunkSize ?? Math.max(piece.length, 1);
    for (let off = 0; off < piece.length; off += size) {
      if (res.destroyed) return 'aborted';
      if (off > 0 || i > 0)
        if (scenario.chunkSize !== undefined) await waitOrClose(res, scenario.chunkDelayMs);
      const chunk = piece.subarray(off, off + size);
      if (!(await writeChunk(res, chunk))) return 'aborted';
      onWrite(chunk);
    }
  }
  if (res.destroyed) return 'aborted';
  await new Promise<void>((resolve) => res.end(resolve));
  return 'complete';
}

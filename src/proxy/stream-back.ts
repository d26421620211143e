/**
 * Step 5, stream back: status and filtered headers, then the body unbuffered (proxy/forward.ts writes it
 * on with backpressure), while the response tap reads usage as the bytes pass. An upstream that drops
 * mid-stream ends the caller's response abnormally too.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Transform } from 'node:stream';
import { providerModule } from '../providers/index.js';
import { resultsUrlRewriter } from '../providers/results-url.js';
import type { Outcome } from '../types.js';
import { createResponseTap } from '../metering/index.js';
import {
  createIdentityUsageStripper,
  createUsageStripper,
  isCompressed,
  isDecodableEncoding,
  type BodyRewrite,
  type ResponseTap,
} from '../usage/index.js';
import { batchObserver, type BatchObserver } from './batches.js';
import type { ProxyServices, Shutdown } from './context.js';
import { midResponseFailure, type Exchange } from './exchange.js';
import type { CallerWatch, ResponseSink } from './forward.js';
import { filterResponseHeaders } from './headers.js';
import { classifyUpstreamError } from './upstream-errors.js';

/**
 * Largest SSE event (or batch-results line) held whole, for usage or the stream-usage rewrite: far above a
 * text delta, above a streamed image's base64; bigger ones are read by head and tail and passed on as-is.
 */
export const SSE_EVENT_BYTES = 2 * 1024 * 1024;
/**
 * Decoded bytes of a compressed response read for usage; a decompression bomb stops here (then usage is
 * estimated). Decoding is synchronous (~100 ms for 32 MiB of brotli): every other request waits that long.
 */
export const USAGE_DECODE_BYTES = 32 * 1024 * 1024;

/**
 * The caller's side of one upstream answer: its head, each body piece through the tap, and at the end the
 * outcome. undici calls start() and data() from its parser (proxy/forward.ts); end() runs once the last
 * byte is out or the body was cut.
 */
export class StreamBack implements ResponseSink {
  private tap: ResponseTap | null = null;
  private batch: BatchObserver | null = null;
  private through: Transform | BodyRewrite | null = null;
  /** The rewrite has written to the caller (and so sent the head). */
  private rewrote = false;

  constructor(
    private readonly s: ProxyServices,
    private readonly ex: Exchange,
    private readonly res: ServerResponse,
    /** The request was sent asking for stream usage: strip what that added (usage/stream-usage.ts). */
    private readonly injected: boolean,
  ) {}

  start(statusCode: number, upstreamHeaders: IncomingHttpHeaders): Transform | BodyRewrite | null {
    const { s, ex, res } = this;
    const provider = ex.provider!;
    const headers = filterResponseHeaders(upstreamHeaders);
    let through: Transform | BodyRewrite | null = null;
    const encoding = upstreamHeaders['content-encoding'];
    const contentType = upstreamHeaders['content-type'];
    // Only a successful SSE stream carries what the injection added; error bodies pass as they are.
    if (
      this.injected &&
      statusCode < 300 &&
      typeof contentType === 'string' &&
      contentType.startsWith('text/event-stream') &&
      (encoding === undefined || (typeof encoding === 'string' && isDecodableEncoding(encoding)))
    ) {
      const opts = { maxEventBytes: s.config.sseEventBytes ?? SSE_EVENT_BYTES };
      through = isCompressed(encoding)
        ? createUsageStripper(encoding, opts)
        : createIdentityUsageStripper(opts, (piece) => {
            this.rewrote = true;
            res.write(piece);
          });
      delete headers['content-length'];
      delete headers['content-encoding'];
    }
    // Batches (proxy/batches.ts): objects recorded, results priced once; Anthropic's results_url rewritten.
    const method = res.req.method ?? 'GET';
    const path = ex.info!.path;
    this.batch = batchObserver(
      { batches: s.batches, log: s.log, maxLineBytes: s.config.sseEventBytes ?? SSE_EVENT_BYTES },
      provider,
      method,
      path,
      statusCode,
    );
    const rewriter = resultsUrlRewriter(
      provider,
      method,
      path,
      statusCode,
      contentType,
      typeof encoding === 'string' ? encoding : undefined,
      `${s.config.publicUrl}/api/proxy/${providerModule(provider).route}`,
    );
    if (rewriter) {
      through = rewriter;
      delete headers['content-length'];
      delete headers['content-encoding'];
    }
    headers['x-keyrelay-request-id'] = ex.id;
    ex.status = statusCode;
    ex.responseHeaders = headers;
    this.tap = createResponseTap(
      ex.info!,
      { status: statusCode, headers: upstreamHeaders },
      {
        bodyLogBytes: ex.logBodies ? s.config.bodyLogBytes : 0,
        maxDecodedBytes: USAGE_DECODE_BYTES,
        maxEventBytes: s.config.sseEventBytes ?? SSE_EVENT_BYTES,
        observer: this.batch,
      },
    );
    res.writeHead(statusCode, headers);
    this.through = through;
    // Node holds the head until the first body write, which then carries it: one write, not two, when the
    // first bytes come with upstream's head (as they usually do, a stream's first event too). A head still
    // held after this turn goes out alone: SDKs resolve on a stream's head, and a body may be slow to come.
    // A decoding stripper writes later than that: its stream's head goes now.
    const sse = typeof contentType === 'string' && contentType.startsWith('text/event-stream');
    if (sse && through instanceof Transform) res.flushHeaders();
    else setImmediate(flushHeld, this);
    return through;
  }

  /**
   * Sends the head if it still waits for a first body write. writeHead() only stores it (headersSent is
   * true before a byte has left), and flushHeaders() once it is out would still write an empty chunk.
   */
  flushHeldHead(): void {
    if (this.res.destroyed || this.res.writableEnded) return; // end() sends the head (an empty body)
    // Unbuffered, every byte received was written on at once (with a transform, only a stream's: above).
    const held =
      this.through === null || this.through instanceof Transform
        ? this.ex.responseBytes === 0
        : !this.rewrote;
    if (held) this.res.flushHeaders();
  }

  data(chunk: Buffer): void {
    const ex = this.ex;
    if (ex.ttfbMs === null) ex.ttfbMs = performance.now() - ex.startedAt;
    ex.responseBytes += chunk.length;
    this.tap!.write(chunk);
  }

  /** The outcome, once the body is through or `cut` (forward.ts); the usage and the logged body read. */
  async end(shutdown: Shutdown, watch: CallerWatch, cut: Error | null): Promise<Outcome> {
    const { s, ex, res } = this;
    const provider = ex.provider!;
    watch.release();
    let outcome: Outcome = ex.status >= 400 ? 'upstream_error' : 'ok';
    if (cut) {
      const draining = shutdown.isDraining();
      if (watch.aborted && !draining) outcome = 'client_aborted';
      else {
        const failure = classifyUpstreamError(cut);
        outcome = draining ? 'timeout' : failure.outcome;
        ({ code: ex.errorCode, message: ex.errorMessage } = midResponseFailure(failure, draining));
        s.metrics.upstreamErrors.inc({ provider, kind: failure.kind });
        // Never let a cut stream look complete: end the caller's response abnormally, after the head
        // upstream did send.
        cutResponse(res);
      }
    }
    if (ex.ttfbMs === null) ex.ttfbMs = performance.now() - ex.startedAt;
    const tap = this.tap!;
    await tap.drained();
    ex.usage = tap.finish(cut === null);
    if (this.batch) await this.batch.settle(ex, cut === null);
    ex.responseBody = tap.body();
    if (ex.status >= 500) s.metrics.upstreamErrors.inc({ provider, kind: 'status_5xx' });
    return outcome;
  }
}

function flushHeld(back: StreamBack): void {
  back.flushHeldHead();
}

/**
 * Ends the caller's response abnormally (no terminating chunk, or short of its content-length) but only
 * after what was already written, the head included, has left: destroy() would discard it. A caller that
 * does not read gets a few seconds, then the socket is destroyed anyway.
 */
function cutResponse(res: ServerResponse): void {
  const socket = res.socket;
  res.flushHeaders(); // once the head is out, an empty write: harmless here
  if (!socket || socket.writableLength === 0) return void res.destroy();
  socket.destroySoon();
  setTimeout(() => socket.destroy(), 5_000).unref();
}

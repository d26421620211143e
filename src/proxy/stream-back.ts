/**
 * Step 5, stream back: status and filtered headers, then the body unbuffered with backpressure, while the
 * response tap reads usage as the bytes pass. An upstream that drops mid-stream ends the caller's response
 * abnormally too.
 */
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Transform } from 'node:stream';
import type { Dispatcher } from 'undici';
import { PROVIDERS } from '../providers/index.js';
import { resultsUrlRewriter } from '../providers/results-url.js';
import type { Outcome } from '../types.js';
import { createResponseTap, createUsageStripper, isDecodableEncoding } from '../usage/index.js';
import { batchObserver } from './batches.js';
import type { ProxyServices, Shutdown } from './context.js';
import { midResponseFailure, type Exchange } from './exchange.js';
import type { CallerWatch } from './forward.js';
import { filterResponseHeaders } from './headers.js';
import { pump } from './pump.js';
import { classifyUpstreamError } from './upstream-errors.js';

/** Streams the upstream response to the caller; resolves with the outcome once the last byte is out. */
export async function streamBack(
  s: ProxyServices,
  shutdown: Shutdown,
  ex: Exchange,
  res: ServerResponse,
  upstream: Dispatcher.ResponseData,
  watch: CallerWatch,
  /** The request was sent asking for stream usage: strip what that added (usage/stream-usage.ts). */
  injected: boolean,
): Promise<Outcome> {
  const provider = ex.provider!;
  const headers = filterResponseHeaders(upstream.headers);
  let stripper: Transform | null = null;
  const encoding = upstream.headers['content-encoding'];
  const contentType = upstream.headers['content-type'];
  // Only a successful SSE stream carries what the injection added; error bodies pass as they are.
  if (
    injected &&
    upstream.statusCode < 300 &&
    typeof contentType === 'string' &&
    contentType.startsWith('text/event-stream') &&
    (encoding === undefined || (typeof encoding === 'string' && isDecodableEncoding(encoding)))
  ) {
    stripper = createUsageStripper(encoding, { maxEventBytes: s.config.sseEventBytes });
    delete headers['content-length'];
    delete headers['content-encoding'];
  }
  // Batches (proxy/batches.ts): objects recorded, results priced once; Anthropic's results_url rewritten.
  const method = res.req.method ?? 'GET';
  const path = ex.info!.path;
  const batch = batchObserver(
    { batches: s.batches, log: s.log, maxLineBytes: s.config.sseEventBytes },
    provider,
    method,
    path,
    upstream.statusCode,
  );
  const rewriter = resultsUrlRewriter(
    provider,
    method,
    path,
    upstream.statusCode,
    contentType,
    typeof encoding === 'string' ? encoding : undefined,
    `${s.config.publicUrl}/api/proxy/${PROVIDERS[provider].route}`,
  );
  if (rewriter) {
    stripper = rewriter;
    delete headers['content-length'];
    delete headers['content-encoding'];
  }
  headers['x-keyrelay-request-id'] = ex.id;
  ex.status = upstream.statusCode;
  ex.responseHeaders = headers;
  const tap = createResponseTap(
    ex.info!,
    { status: upstream.statusCode, headers: upstream.headers },
    {
      bodyLogBytes: ex.logBodies ? s.config.bodyLogBytes : 0,
      maxDecodedBytes: s.config.usageDecodeBytes,
      maxEventBytes: s.config.sseEventBytes,
      observer: batch,
    },
  );
  res.writeHead(upstream.statusCode, headers);
  // Node holds the head until the first body write. For a stream, upstream already sent its head and SDKs
  // resolve on it: send it now. Other bodies follow their head at once, and go out in one write with it.
  if (typeof contentType === 'string' && contentType.startsWith('text/event-stream')) res.flushHeaders();
  // (writeHead only stores the head: headersSent is true before a byte has left.)
  else setImmediate(() => ex.responseBytes > 0 || res.destroyed || res.flushHeaders()); // body slow to come
  upstream.body.on('data', (chunk: Buffer) => {
    if (ex.ttfbMs === null) ex.ttfbMs = performance.now() - ex.startedAt;
    ex.responseBytes += chunk.length;
    tap.write(chunk);
  });
  let outcome: Outcome = upstream.statusCode >= 400 ? 'upstream_error' : 'ok';
  let complete = true;
  try {
    await pump(upstream.body, stripper, res);
  } catch (err) {
    complete = false;
    const draining = shutdown.isDraining();
    if (watch.aborted && !draining) outcome = 'client_aborted';
    else {
      const failure = classifyUpstreamError(err);
      outcome = draining ? 'timeout' : failure.outcome;
      ({ code: ex.errorCode, message: ex.errorMessage } = midResponseFailure(failure, draining));
      s.metrics.upstreamErrors.inc({ provider, kind: failure.kind });
      // Never let a cut stream look complete: end the caller's response abnormally, after the head
      // upstream did send.
      cutResponse(res);
    }
  } finally {
    watch.release();
  }
  if (ex.ttfbMs === null) ex.ttfbMs = performance.now() - ex.startedAt;
  ex.usage = tap.finish(complete);
  if (batch) await batch.settle(ex, complete);
  ex.responseBody = tap.body();
  if (upstream.statusCode >= 500) s.metrics.upstreamErrors.inc({ provider, kind: 'status_5xx' });
  return outcome;
}

/**
 * Ends the caller's response abnormally (no terminating chunk, or short of its content-length) but only
 * after what was already written, the head included, has left: destroy() would discard it. A caller that
 * does not read gets a few seconds, then the socket is destroyed anyway.
 */
function cutResponse(res: ServerResponse): void {
  const socket = res.socket;
  res.flushHeaders(); // a no-op once the head is out
  if (!socket || socket.writableLength === 0) return void res.destroy();
  socket.destroySoon();
  setTimeout(() => socket.destroy(), 5_000).unref();
}

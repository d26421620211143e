/**
 * THE HOT PATH. One proxied request, top to bottom:
 *   route → authenticate → read body → forward → stream back → hand the record to the log.
 * The response always goes first; the log row is built after the last byte and queued, never awaited.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Transform } from 'node:stream';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Config } from '../config.js';
import { ProxyError, renderProxyError } from '../errors.js';
import { newId } from '../ids.js';
import { PROVIDERS } from '../providers/index.js';
import type { LastUsedTracker } from '../keys/last-used.js';
import type { KeyVerifier } from '../keys/verify.js';
import type { Limits } from '../limits/limiter.js';
import type { RequestLogRow } from '../log/record.js';
import { observeRow, type Metrics } from '../metrics.js';
import {
  createResponseTap,
  createUsageStripper,
  injectStreamUsage,
  isDecodableEncoding,
  parseRequestInfo,
} from '../usage/index.js';
import { resultsUrlRewriter } from '../providers/results-url.js';
import type { BatchStore } from '../store/batch-types.js';
import { batchObserver } from './batches.js';
import { readBody } from './body.js';
import { pump } from './pump.js';
import { midResponseFailure, newExchange, toLogRow, type Exchange, type RowContext } from './exchange.js';
import {
  filterResponseHeaders,
  findDuplicateSingleton,
  forwardRequestHeaders,
  hasUnderscoreKeyHeader,
} from './headers.js';
import { classifyUpstreamError } from './upstream-errors.js';
import { resolveTarget } from './target.js';

export interface ProxyContext extends RowContext {
  config: Readonly<Config>;
  keys: KeyVerifier;
  lastUsed: LastUsedTracker;
  record: (row: RequestLogRow) => void;
  limits: Limits;
  metrics: Metrics;
  log: Logger;
  dispatcher: Dispatcher;
  isDraining: () => boolean;
  /** Aborts for in-flight upstream requests, so shutdown can cut what outlives the drain deadline. */
  inflight: Set<() => void>;
  /** Every exchange until its log row is queued: shutdown waits for these before the final flush. */
  active: Set<Promise<void>>;
  /** Batches seen and their results' one-time cost (issue #13, proxy/batches.ts); absent: not tracked. */
  batches?: BatchStore | null;
}

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);

export function createProxyHandler(ctx: ProxyContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const done = handle(ctx, req, res)
      .catch((err: unknown) => {
        ctx.log.error({ err }, 'proxy handler failed');
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      })
      .finally(() => ctx.active.delete(done));
    ctx.active.add(done);
  };
}

async function handle(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const ex = newExchange(newId(), performance.now(), req.socket.remoteAddress);
  res.setHeader('x-keyrelay-request-id', ex.id);

  // 1. Route: which provider, which upstream path; refuse anything that could leave the configured origin.
  const target = resolveTarget(req.url ?? '');
  if (!target.ok) {
    ex.provider = target.provider ?? null;
    const code = target.reason === 'unknown_provider' ? 'proxy_unknown_provider' : 'proxy_bad_request';
    return refuse(ctx, ex, req, res, new ProxyError(code, target.detail));
  }
  ex.provider = target.provider;
  ex.path = target.path + target.query;
  // Claude Code probes its base URL with an unauthenticated HEAD at start; answer it without going upstream.
  if (req.method === 'HEAD' && target.path === '/') return void res.writeHead(200).end();
  if (!METHODS.has(req.method ?? ''))
    return refuse(ctx, ex, req, res, new ProxyError('proxy_bad_request', 'Unsupported method.'));
  const dup = findDuplicateSingleton(req.rawHeaders);
  if (dup) return refuse(ctx, ex, req, res, new ProxyError('proxy_bad_request', `Duplicate ${dup} header.`));
  if (hasUnderscoreKeyHeader(req.rawHeaders))
    return refuse(ctx, ex, req, res, new ProxyError('proxy_bad_request', 'Send the key as proxy-api-key.'));

  // 2. Authenticate: format and checksum, then the in-memory cache; no database read in the steady state.
  const presented = req.headers['proxy-api-key'];
  const { key, error } = await ctx.keys.check(typeof presented === 'string' ? presented : undefined);
  ex.key = key;
  if (error) return refuse(ctx, ex, req, res, error);
  // Checked after the key so that the refusal is logged against it like every other answer.
  if (ctx.isDraining()) return refuse(ctx, ex, req, res, new ProxyError('proxy_unavailable', undefined, 5));
  ctx.lastUsed.mark(key!.id, ex.createdAt);
  ex.logBodies = req.headers['proxy-log-bodies'] !== 'false';

  // 3. Body: bounded, forwarded as received (one documented exception: OpenAI stream usage, see usage/).
  try {
    ex.requestBody = await readBody(req, ctx.config.maxBodyBytes);
  } catch (err) {
    if (err instanceof ProxyError) return refuse(ctx, ex, req, res, err);
    return finish(ctx, ex, req, res, 'client_aborted');
  }
  ex.info = parseRequestInfo(target.provider, target.path, ex.requestBody, req.headers['content-type']);
  // An upload whose model cannot be read would slip past model limits; upstream would refuse it anyway.
  if (ex.info.bodyError)
    return refuse(ctx, ex, req, res, new ProxyError('proxy_bad_request', ex.info.bodyError));
  // Per-key controls need the model, so they run once the body is parsed; memory only, no await.
  const limited = ctx.limits.check(key!, target.provider, ex.info.model, req.method);
  if (limited) return refuse(ctx, ex, req, res, limited);
  const injected = ctx.config.openaiStreamUsage ? injectStreamUsage(ex.info, ex.requestBody) : null;

  // 4. Forward. A caller that goes away aborts the upstream request at once, also before the first byte.
  // undici takes an EventEmitter as its signal: cheaper than an AbortController per request. A 'close'
  // after a complete response is not an abort (aborting then would cost the pooled upstream connection).
  const abort = new EventEmitter();
  let aborted = false;
  const onClose = () => {
    if (aborted || res.writableFinished) return;
    aborted = true;
    abort.emit('abort');
  };
  res.once('close', onClose);
  ctx.inflight.add(onClose);
  let upstream: Dispatcher.ResponseData;
  try {
    const body = injected ?? ex.requestBody;
    // The dispatcher, not undici's request(url): that parses a URL, which would re-encode the caller's
    // path and query (e.g. ' → %27); the path goes upstream exactly as received and validated.
    upstream = await ctx.dispatcher.request({
      origin: ctx.config.upstreams[target.provider],
      path: ex.path,
      method: req.method as Dispatcher.HttpMethod,
      headers: forwardRequestHeaders(req.rawHeaders, req.headers.connection),
      body: body.length > 0 || (req.method !== 'GET' && req.method !== 'HEAD') ? body : undefined,
      signal: abort,
      headersTimeout: ctx.config.headersTimeoutMs,
      bodyTimeout: ctx.config.idleTimeoutMs,
    });
  } catch (err) {
    ctx.inflight.delete(onClose);
    if (res.destroyed || aborted) return finish(ctx, ex, req, res, 'client_aborted');
    const failure = classifyUpstreamError(err);
    ctx.metrics.upstreamErrors.inc({ provider: target.provider, kind: failure.kind });
    return refuse(ctx, ex, req, res, failure.error, failure.outcome);
  }

  // 5. Stream back, unbuffered, with backpressure; the tap reads usage as bytes pass.
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
    stripper = createUsageStripper(encoding, { maxEventBytes: ctx.config.sseEventBytes });
    delete headers['content-length'];
    delete headers['content-encoding'];
  }
  // Batches (proxy/batches.ts): objects recorded, results priced once; Anthropic's results_url rewritten.
  const method = req.method ?? 'GET';
  const batch = batchObserver(
    { batches: ctx.batches, log: ctx.log, maxLineBytes: ctx.config.sseEventBytes },
    target.provider,
    method,
    target.path,
    upstream.statusCode,
  );
  const rewriter = resultsUrlRewriter(
    target.provider,
    method,
    target.path,
    upstream.statusCode,
    contentType,
    typeof encoding === 'string' ? encoding : undefined,
    `${ctx.config.publicUrl}/api/proxy/${PROVIDERS[target.provider].route}`,
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
    ex.info,
    { status: upstream.statusCode, headers: upstream.headers },
    {
      bodyLogBytes: ex.logBodies ? ctx.config.bodyLogBytes : 0,
      maxDecodedBytes: ctx.config.usageDecodeBytes,
      maxEventBytes: ctx.config.sseEventBytes,
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
  let outcome: Exchange['outcome'] = upstream.statusCode >= 400 ? 'upstream_error' : 'ok';
  let complete = true;
  try {
    await pump(upstream.body, stripper, res);
  } catch (err) {
    complete = false;
    if (aborted && !ctx.isDraining()) outcome = 'client_aborted';
    else {
      const failure = classifyUpstreamError(err);
      outcome = ctx.isDraining() ? 'timeout' : failure.outcome;
      ({ code: ex.errorCode, message: ex.errorMessage } = midResponseFailure(failure, ctx.isDraining()));
      ctx.metrics.upstreamErrors.inc({ provider: target.provider, kind: failure.kind });
      // Never let a cut stream look complete: end the caller's response abnormally, after the head
      // upstream did send.
      cutResponse(res);
    }
  } finally {
    ctx.inflight.delete(onClose);
    res.off('close', onClose);
  }
  if (ex.ttfbMs === null) ex.ttfbMs = performance.now() - ex.startedAt;
  ex.usage = tap.finish(complete);
  if (batch) await batch.settle(ex, complete);
  ex.responseBody = tap.body();
  if (upstream.statusCode >= 500)
    ctx.metrics.upstreamErrors.inc({ provider: target.provider, kind: 'status_5xx' });
  finish(ctx, ex, req, res, outcome);
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

/** keyrelay's own refusal, in the provider's error shape; logged when the key is known. */
function refuse(
  ctx: ProxyContext,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
  err: ProxyError,
  outcome: Exchange['outcome'] = 'refused',
): void {
  ex.status = err.status;
  ex.errorCode = err.code;
  ex.errorMessage = err.message;
  if (!res.headersSent && !res.destroyed) {
    const body = renderProxyError(ex.provider, err);
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-keyrelay-error': err.code,
      'x-keyrelay-request-id': ex.id,
      'x-content-type-options': 'nosniff',
    };
    if (err.retryAfterSeconds !== undefined) headers['retry-after'] = err.retryAfterSeconds;
    // An unread body (413, refused before reading) would be taken for the next request on this connection.
    if (!req.complete) headers.connection = 'close';
    res.writeHead(err.status, headers).end(body);
  }
  if (
    err.code === 'proxy_body_too_large' ||
    err.code === 'proxy_bad_request' ||
    err.code.startsWith('proxy_key')
  ) {
    ctx.log.info({ reqId: ex.id, code: err.code, provider: ex.provider }, 'proxy request refused');
  } else if (outcome !== 'refused') {
    ctx.log.warn(
      { reqId: ex.id, code: err.code, provider: ex.provider, detail: err.message },
      'upstream failure',
    );
  }
  finish(ctx, ex, req, res, outcome);
}

function finish(
  ctx: ProxyContext,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
  outcome: Exchange['outcome'],
): void {
  ex.outcome = outcome;
  const endedAt = performance.now();
  if (outcome === 'client_aborted' && !res.headersSent) ex.status = 0;
  if (!ex.key || !ex.provider) return; // nothing to attribute the row to
  const row = toLogRow(ex, req, ctx, endedAt);
  observeRow(ctx.metrics, row);
  ctx.record(row);
  ctx.limits.record(row);
}

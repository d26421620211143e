/**
 * THE HOT PATH. One proxied request, top to bottom, as docs/ARCHITECTURE.md ("Request flow") tells it:
 *   route → authenticate → read body → forward → stream back → record.
 * The response always goes first; the log row is built after the last byte and queued, never awaited.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { ProxyError } from '../errors.js';
import { newTimedId } from '../ids.js';
import { injectStreamUsage, parseRequestInfo } from '../usage/index.js';
import { failInternally, finish, refuse } from './answer.js';
import { readBody } from './body.js';
import type { ProxyServices, Shutdown } from './context.js';
import { keepsBodies, newExchange, type Exchange } from './exchange.js';
import { CallerWatch, forward } from './forward.js';
import { findDuplicateSingleton, hasUnderscoreKeyHeader } from './headers.js';
import { StreamBack } from './stream-back.js';
import { resolveTarget } from './target.js';

export type { ProxyServices, Shutdown } from './context.js';

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);

export function createProxyHandler(
  s: ProxyServices,
  shutdown: Shutdown,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const ex = newExchange(newTimedId(), performance.now(), req.socket.remoteAddress);
    const done = run(s, shutdown, ex, req, res);
    ex.running = done;
    shutdown.active.add(done);
  };
}

/** One exchange, its unexpected failures included; one promise and no closures a request. */
async function run(
  s: ProxyServices,
  shutdown: Shutdown,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  try {
    await handle(s, shutdown, ex, req, res);
  } catch (err) {
    try {
      failInternally(s, ex, req, res, err);
    } catch (again) {
      s.log.error({ err: again, reqId: ex.id }, 'proxy failure handling failed');
      res.destroy();
    }
  } finally {
    // Never before the caller has stored `running`: the `await` above yields at least once.
    if (ex.running) shutdown.active.delete(ex.running);
  }
}

async function handle(
  s: ProxyServices,
  shutdown: Shutdown,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  // Every answer names its request id in its own head (answer.ts, stream-back.ts): a header set here
  // would send writeHead down Node's slow path, which merges each upstream header into it one by one.

  // 1. Route: which provider, which upstream path; refuse anything that could leave the configured origin.
  const target = resolveTarget(req.url ?? '');
  ex.provider = target.provider ?? null;
  if (!target.ok) {
    if (target.provider) ex.path = target.rawPath;
    const code = target.reason === 'unknown_provider' ? 'proxy_unknown_provider' : 'proxy_bad_request';
    return refuseBeforeKey(s, ex, req, res, new ProxyError(code, target.detail));
  }
  ex.path = target.path + target.query;
  // Claude Code probes its base URL with an unauthenticated HEAD at start; answer it without going upstream.
  if (req.method === 'HEAD' && target.path === '/')
    return void res.writeHead(200, { 'x-keyrelay-request-id': ex.id }).end();
  const malformed = checkRequestLine(req);
  if (malformed) return refuseBeforeKey(s, ex, req, res, malformed);

  // 2. Authenticate: format and checksum, then the in-memory cache; no database read in the steady state.
  const checked = await s.keys.check(presentedKey(req));
  ex.key = checked.key;
  if (!checked.ok) return refuse(s, ex, req, res, checked.error);
  const key = checked.key;
  // Checked after the key so that the refusal is logged against it like every other answer.
  if (shutdown.isDraining())
    return refuse(s, ex, req, res, new ProxyError('proxy_unavailable', undefined, 5));
  s.lastUsed.mark(key.id, ex.createdAt);
  ex.logBodies = keepsBodies(s.config, req.headers);

  // 3. Body: bounded, forwarded as received (one documented exception: stream usage, see usage/).
  try {
    ex.requestBody = await readBody(req, s.config.maxBodyBytes);
  } catch (err) {
    if (err instanceof ProxyError) return refuse(s, ex, req, res, err);
    return finish(s, ex, req, res, 'client_aborted');
  }
  ex.info = parseRequestInfo(target.provider, target.path, ex.requestBody, req.headers['content-type']);
  // An upload whose model cannot be read would slip past model limits; upstream would refuse it anyway.
  if (ex.info.bodyError)
    return refuse(s, ex, req, res, new ProxyError('proxy_bad_request', ex.info.bodyError));
  // Per-key controls need the model, so they run once the body is parsed.
  // Limits (issue #13): a refusal, or what the request holds (reservation, slot, tokens) until finish().
  let admitted = s.limits.admit(key, target.provider, ex.info, req.method!);
  if (admitted instanceof Promise) admitted = await admitted;
  if (admitted instanceof ProxyError) return refuse(s, ex, req, res, admitted);
  ex.hold = admitted;
  const injected = s.config.openaiStreamUsage ? injectStreamUsage(ex.info, ex.requestBody) : null;

  // 4. Forward; from here a caller that goes away aborts the upstream request at once.
  // 5. Stream back as undici hands over each piece, unbuffered, with backpressure; the tap reads usage.
  const watch = new CallerWatch(res, shutdown.inflight);
  const back = new StreamBack(s, ex, res, injected !== null);
  const origin = s.config.upstreams[target.provider];
  const to = { origin, path: ex.path, body: injected ?? ex.requestBody };
  const sent = await forward(s, req, res, to, watch, back);
  if (!sent.ok) {
    if (sent.aborted) return finish(s, ex, req, res, 'client_aborted');
    s.metrics.upstreamErrors.inc({ provider: target.provider, kind: sent.failure.kind });
    return refuse(s, ex, req, res, sent.failure.error, sent.failure.outcome);
  }
  const outcome = await back.end(shutdown, watch, sent.cut);

  // 6. Record, after the last byte.
  finish(s, ex, req, res, outcome);
}

/**
 * A refusal decided before the key is looked at. The answer does not depend on the key, but a known key
 * gets the refusal logged against it, so that the request id on the answer names a row (a row needs a
 * provider to be filed under: a target naming none is refused unlogged).
 */
async function refuseBeforeKey(
  s: ProxyServices,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
  err: ProxyError,
): Promise<void> {
  if (ex.provider) ex.key = (await s.keys.check(presentedKey(req))).key;
  refuse(s, ex, req, res, err);
}

function presentedKey(req: IncomingMessage): string | undefined {
  const presented = req.headers['proxy-api-key'];
  return typeof presented === 'string' ? presented : undefined;
}

/** What keyrelay refuses in the request line and headers, before the key is even looked at. */
function checkRequestLine(req: IncomingMessage): ProxyError | null {
  if (!METHODS.has(req.method ?? '')) return new ProxyError('proxy_bad_request', 'Unsupported method.');
  const dup = findDuplicateSingleton(req.rawHeaders);
  if (dup) return new ProxyError('proxy_bad_request', `Duplicate ${dup} header.`);
  if (hasUnderscoreKeyHeader(req.rawHeaders))
    return new ProxyError('proxy_bad_request', 'Send the key as proxy-api-key.');
  return null;
}

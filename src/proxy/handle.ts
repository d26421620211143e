/**
 * THE HOT PATH. One proxied request, top to bottom, as docs/ARCHITECTURE.md ("Request flow") tells it:
 *   route → authenticate → read body → forward → stream back → record.
 * The response always goes first; the log row is built after the last byte and queued, never awaited.
 */
import { upstreamOrigin } from '../config.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { ProxyError } from '../errors.js';
import { newTimedId } from '../ids.js';
import { injectStreamUsage, readRequestInfo } from '../metering/index.js';
import { admitKey, checkRequestLine, presentedKey, route } from './admission.js';
import { endUserOf } from './attribution.js';
import { failInternally, finish, refuse } from './answer.js';
import { needsBatchInput, readBatchInput } from './batches.js';
import { readBody } from './body.js';
import type { ProxyServices, Shutdown } from './context.js';
import { keepsBodies, newExchange, type Exchange } from './exchange.js';
import { CallerWatch, forward } from './forward.js';
import { StreamBack } from './stream-back.js';

export type { ProxyServices, Shutdown } from './context.js';

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
  const target = route(ex, req.url ?? '');
  if (target instanceof ProxyError) return refuseBeforeKey(s, ex, req, res, target);
  // Claude Code probes its base URL with an unauthenticated HEAD at start; answer it without going upstream.
  if (req.method === 'HEAD' && target.path === '/')
    return void res.writeHead(200, { 'x-keyrelay-request-id': ex.id }).end();
  const malformed = checkRequestLine(req);
  if (malformed) return refuseBeforeKey(s, ex, req, res, malformed);

  // 2. Authenticate: format and checksum, then the in-memory cache; no database read in the steady state.
  const checked = await s.keys.check(presentedKey(req));
  const key = admitKey(s, shutdown, ex, checked, ex.createdAt);
  if (key instanceof ProxyError) return refuse(s, ex, req, res, key);
  ex.logBodies = keepsBodies(s.config, req.headers);

  // 3. Body: bounded, forwarded as received (one documented exception: stream usage, see usage/).
  try {
    ex.requestBody = await readBody(req, res, s.config.maxBodyBytes);
  } catch (err) {
    if (err instanceof ProxyError) return refuse(s, ex, req, res, err);
    return finish(s, ex, req, res, 'client_aborted');
  }
  const info = readRequestInfo(target.provider, target.path, ex.requestBody, req.headers['content-type']);
  ex.info = info instanceof Promise ? await info : info;
  // An upload whose model cannot be read would slip past model limits; upstream would refuse it anyway.
  if (ex.info.bodyError)
    return refuse(s, ex, req, res, new ProxyError('proxy_bad_request', ex.info.bodyError));
  // A batch runs what its input file names: read from upstream when the key's model list must see it.
  const unchecked = needsBatchInput(key, ex.info) && (await readBatchInput(s, req, ex.info));
  if (unchecked) return refuse(s, ex, req, res, unchecked);
  // Per-key controls need the model, so they run once the body is parsed.
  // Limits: a refusal, or what the request holds (reservation, slot, tokens) until finish().
  const endUser = endUserOf(req.headers, ex.info);
  let admitted = s.limits.admit(key, target.provider, ex.info, req.method!, endUser);
  if (admitted instanceof Promise) admitted = await admitted;
  if (admitted instanceof ProxyError) return refuse(s, ex, req, res, admitted);
  ex.hold = admitted;
  const injected = injectStreamUsage(ex.info, ex.requestBody);

  // 4. Forward; from here a caller that goes away aborts the upstream request at once.
  // 5. Stream back as undici hands over each piece, unbuffered, with backpressure; the tap reads usage.
  const watch = new CallerWatch(res, shutdown.inflight);
  const back = new StreamBack(s, ex, res, injected !== null);
  const origin = upstreamOrigin(s.config, target.provider);
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

/**
 * How an exchange ends: keyrelay's own refusal in the provider's error shape (`refuse`), and the log row
 * once the response is over (`finish`), queued and never awaited.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { ProxyError, renderProxyError } from '../errors.js';
import type { Outcome } from '../types.js';
import { observeRow } from '../metrics.js';
import type { ProxyServices } from './context.js';
import { toLogRow, type Exchange } from './exchange.js';

/** keyrelay's own refusal, in the provider's error shape; logged when the key is known. */
export function refuse(
  s: ProxyServices,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
  err: ProxyError,
  outcome: Outcome = 'refused',
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
    s.log.info({ reqId: ex.id, code: err.code, provider: ex.provider }, 'proxy request refused');
  } else if (outcome !== 'refused') {
    s.log.warn(
      { reqId: ex.id, code: err.code, provider: ex.provider, detail: err.message },
      'upstream failure',
    );
  }
  finish(s, ex, req, res, outcome);
}

/**
 * An unexpected failure of keyrelay's own (a throw anywhere in the steps): logged with its stack, answered
 * 500 `proxy_internal_error` in the provider's shape when the head is not out yet, else the response is cut;
 * recorded against the key when it is known (unless the failure was in recording itself).
 */
export function failInternally(
  s: ProxyServices,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
  cause: unknown,
): void {
  s.log.error({ err: cause, reqId: ex.id, provider: ex.provider }, 'proxy handler failed');
  const err = new ProxyError('proxy_internal_error', undefined, undefined, { cause });
  if (!res.headersSent) return refuse(s, ex, req, res, err);
  // The caller got part of a response: like an upstream drop, it must not look complete.
  res.destroy();
  ex.errorCode = err.code;
  ex.errorMessage = err.message;
  finish(s, ex, req, res, 'upstream_error');
}

/** Step 6, record: the row is built after the last byte and queued; the response never waits for it. */
export function finish(
  s: ProxyServices,
  ex: Exchange,
  req: IncomingMessage,
  res: ServerResponse,
  outcome: Outcome,
): void {
  if (ex.finished) return;
  ex.finished = true;
  ex.outcome = outcome;
  const endedAt = performance.now();
  if (outcome === 'client_aborted' && !res.headersSent) ex.status = 0;
  if (!ex.key || !ex.provider) return; // nothing to attribute the row to
  const row = toLogRow(ex, req, s, endedAt);
  observeRow(s.metrics, row);
  s.record(row);
  s.limits.settle(ex.hold, row); // every ending comes here: releases what the request held (docs/limits.md)
}

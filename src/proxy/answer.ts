/**
 * How an exchange ends: keyrelay's own refusal in the provider's error shape (`refuse`), and the log row
 * once the response is over (`finish`), queued and never awaited.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { ProxyError } from '../errors.js';
import { answerBeforeBody } from '../http-guard.js';
import type { Outcome } from '../types.js';
import { observeRow } from '../metrics.js';
import { logRefusal, refusalBody, refusalHeaders } from './admission.js';
import type { ProxyServices } from './context.js';
import { toLogRow, unfiledCall, type Exchange } from './exchange.js';

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
    const body = refusalBody(ex, err);
    const headers = refusalHeaders(err, ex.id, body);
    // An unread body (413, refused before reading) would be taken for the next request on this connection:
    // the connection ends after the answer, with the body read and discarded first (http-guard.ts).
    if (!req.complete) answerBeforeBody(req, res, err.status, headers, body);
    else res.writeHead(err.status, headers).end(body);
  }
  logRefusal(s, ex, err, outcome);
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
  if (!ex.key || !ex.provider) {
    // Nothing to attribute a row to; a trace still shows the refusal.
    s.telemetry?.observe(unfiledCall(ex, req, endedAt), req.headers, ex.info?.model ?? null);
    return;
  }
  const row = toLogRow(ex, req, s, endedAt);
  observeRow(s.metrics, row);
  s.record(row);
  s.limits.settle(ex.hold, row); // every ending comes here: releases what the request held (docs/limits.md)
  s.telemetry?.observe(row, req.headers, ex.info?.model ?? null, ex.usage?.finish_reasons);
}

/**
 * The one way into the proxy, for plain requests (handle.ts) and WebSocket upgrades (websocket/upgrade.ts):
 *   route → request line → key → draining → limits
 * and the one way a refusal is answered and logged, whether it goes out on a ServerResponse or on an
 * upgrade's raw socket. Each step returns its refusal as a ProxyError, or what it found; none throws one
 * (the convention of limits/ too: `Admission` is a refusal, a hold or nothing).
 */
import type { IncomingMessage } from 'node:http';
import { ProxyError } from '../errors.js';
import { renderProxyError } from '../providers/index.js';
import type { KeyCheck } from '../keys/verify.js';
import type { KeyRecord } from '../store/types.js';
import type { Outcome, Provider } from '../types.js';
import type { ProxyServices, Shutdown } from './context.js';
import { findDuplicateSingleton, hasUnderscoreKeyHeader } from './headers.js';
import { resolveTarget, type TargetResult } from './target.js';

/** What admission has learned of a request so far: what its refusal is answered in and logged against. */
export interface Arrival {
  readonly id: string;
  provider: Provider | null;
  path: string;
  key: KeyRecord | null;
}

export type Route = Extract<TargetResult, { ok: true }>;

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);

/** Step 1, route: which provider and upstream path; anything that could leave the configured origin is refused. */
export function route(a: Arrival, url: string): Route | ProxyError {
  const target = resolveTarget(url);
  a.provider = target.provider ?? null;
  if (!target.ok) {
    if (target.provider) a.path = target.rawPath;
    const code = target.reason === 'unknown_provider' ? 'proxy_unknown_provider' : 'proxy_bad_request';
    return new ProxyError(code, target.detail);
  }
  a.path = target.path + target.query;
  return target;
}

/** Step 2, what keyrelay refuses in the request line and headers, before the key is even looked at. */
export function checkRequestLine(req: IncomingMessage): ProxyError | null {
  if (!METHODS.has(req.method ?? '')) return new ProxyError('proxy_bad_request', 'Unsupported method.');
  const dup = findDuplicateSingleton(req.rawHeaders);
  if (dup) return new ProxyError('proxy_bad_request', `Duplicate ${dup} header.`);
  if (hasUnderscoreKeyHeader(req.rawHeaders))
    return new ProxyError('proxy_bad_request', 'Send the key as proxy-api-key.');
  return null;
}

export function presentedKey(req: IncomingMessage): string | undefined {
  const presented = req.headers['proxy-api-key'];
  return typeof presented === 'string' ? presented : undefined;
}

/**
 * Steps 3 and 4, the key as the verifier found it, then draining: checked after the key so that the refusal
 * is logged against it like every other answer. `at`: the request's time, for the key's last use.
 * The key that may go on, or the refusal.
 */
export function admitKey(
  s: Pick<ProxyServices, 'lastUsed'>,
  shutdown: Pick<Shutdown, 'isDraining'>,
  a: Arrival,
  checked: KeyCheck,
  at: string,
): KeyRecord | ProxyError {
  a.key = checked.key;
  if (!checked.ok) return checked.error;
  if (shutdown.isDraining()) return new ProxyError('proxy_unavailable', undefined, 5);
  s.lastUsed.mark(checked.key.id, at);
  return checked.key;
}

/**
 * A refusal's head, the same on a ServerResponse and on an upgrade's raw socket (framing aside): the
 * provider's error shape, keyrelay's code and the request id that names its row.
 */
export function refusalHeaders(err: ProxyError, id: string, body: string): Record<string, string | number> {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-keyrelay-error': err.code,
    'x-keyrelay-request-id': id,
    'x-content-type-options': 'nosniff',
  };
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] = err.retryAfterSeconds;
  return headers;
}

export function refusalBody(a: Arrival, err: ProxyError): string {
  return renderProxyError(a.provider, err);
}

/**
 * The one log line of a refusal: the caller's mistakes (bad request, key, size) at info, upstream failures
 * at warn; limits and draining are in the request log and the metrics, not the process log.
 */
export function logRefusal(
  s: Pick<ProxyServices, 'log'>,
  a: Arrival,
  err: ProxyError,
  outcome: Outcome,
  detail?: string,
): void {
  if (
    err.code === 'proxy_body_too_large' ||
    err.code === 'proxy_bad_request' ||
    err.code.startsWith('proxy_key')
  ) {
    s.log.info({ reqId: a.id, code: err.code, provider: a.provider }, 'proxy request refused');
  } else if (outcome !== 'refused') {
    s.log.warn(
      { reqId: a.id, code: err.code, provider: a.provider, detail: detail ?? err.message },
      'upstream failure',
    );
  }
}
